// Command bench measures the runtime on real servers and writes docs/benchmarks.md.
//
// It lives in its own Go module so that the peer it compares against,
// github.com/openmcp-project/opencontrolplane-runtime (the standard-mode runtime the
// platform uses today), is a dependency of the benchmark only, never of the product.
//
// One run measures, side by side, because the machines it runs on are noisy and only
// ratios measured together mean anything:
//
//   - kcp mode at several workspace counts: every tenant workspace binds the export
//     (setup), then all tenants create one Service object at once; time until all are
//     Ready, per-object time to Ready, requests per object by verb, TokenRequests per
//     workspace, peak memory, and the requests issued per minute once nothing changes;
//   - the physical floor: the writes a perfect runtime could not avoid under this
//     project's requirements (the transition events, least-privilege RBAC, one platform
//     namespace per tenant), issued by a bare client with the same concurrency to the
//     same servers;
//   - standard mode, this runtime and opencontrolplane-runtime serving the same no-op
//     provider and the same objects on fresh API servers;
//   - with -flux-sizes, the greeter example provider (examples/greeter) in standard
//     mode installing its chart for n ControlPlanes through Flux, against Flux alone
//     installing the same n releases from objects a bare client writes (flux.go;
//     docs/benchmarks-flux.md).
//
// The runtime's requests are counted by wrapping its transports
// (builder.Options.WrapTransport). In kcp mode the runtime runs in a process of its own,
// this binary started again (child.go), so its memory is measured alone; in standard
// mode both runtimes run in this process (see mem.go). The API servers are separate
// processes; the local platform granting cluster access runs in this process.
//
// Run it with `make bench`. KSP_BENCH_PROFILES=<dir> saves heap and goroutine profiles
// of the kcp-mode runtime's process with every workspace engaged and at convergence
// (and of each replica at convergence);
// KSP_BENCH_TRACE=1 logs every counted request, KSP_BENCH_TRACE=<dir> into one file
// per process (the benchmark, each runtime process) in dir.
package main
