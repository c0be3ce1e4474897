// Package ops serves what operators run the process by: the Prometheus metrics
// endpoint and the /healthz and /readyz probes (docs/design/observability.md).
//
// One metrics endpoint and one pair of probes cover every mode of a process. When a
// manager lives as long as the process (standard or platform-service mode), that
// manager serves them and the runtime adds its checks to it; a kcp-only process has
// none, since kcp mode's manager is replaced whenever spec.kcp changes and its port
// would flap, so the runtime serves them itself with Serve. Either way the checks come
// from their owners as plain healthz.Checkers: this package knows no mode.
package ops
