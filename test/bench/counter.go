package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// trace logs every counted request, to find where time goes and what a request per
// object was for: KSP_BENCH_TRACE=1 to standard error (the benchmark's own; a
// runtime process's goes to its log in the run folder, removed at the end), or
// KSP_BENCH_TRACE=<folder> to <folder>/<process>.trace, kept.
var (
	trace              = os.Getenv("KSP_BENCH_TRACE") != ""
	traceOut io.Writer = os.Stderr
)

// openTrace sends this process's trace to a file of its own when KSP_BENCH_TRACE
// names a folder.
func openTrace(process string) error {
	dir := os.Getenv("KSP_BENCH_TRACE")
	if dir == "" || dir == "1" {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, process+".trace"))
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	traceOut = f
	return nil
}

// Verbs the counter tells apart. tokenrequest is a create of serviceaccounts/token,
// counted on its own because the targets name it.
var verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "tokenrequest", "discovery"}

// writeVerbs change state on a server.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "tokenrequest": true}

// counter counts the requests that pass through the transports it wraps, by verb.
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	// byResource counts requests by verb and resource, to say what they were.
	byResource map[string]int
	// refusedTokens counts the TokenRequests that minted nothing (refused while a new
	// binding had not reached the authorizer yet, and retried), among counts'.
	refusedTokens int
}

func newCounter() *counter {
	return &counter{counts: map[string]int{}, byResource: map[string]int{}}
}

// wrap is a rest.Config WrapTransport (and builder.Options.WrapTransport).
func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := classify(req.Method, req.URL)
		c.mu.Lock()
		c.counts[verb]++
		c.byResource[verb+" "+resource]++
		c.mu.Unlock()
		if !trace && verb != "tokenrequest" {
			return rt.RoundTrip(req)
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		if verb == "tokenrequest" && (code < 200 || code > 299) {
			c.mu.Lock()
			c.refusedTokens++
			c.mu.Unlock()
		}
		if !trace {
			return resp, err
		}
		fmt.Fprintf(traceOut, "TRACE %s %s %s %d %s %v\n", start.Format("15:04:05.000"), verb, req.URL.Path, code, time.Since(start).Round(time.Millisecond), err)
		return resp, err
	})
}

// snapshot is a copy of the counts at one moment.
type snapshot struct {
	counts     map[string]int
	byResource map[string]int
	// reconciles counts the runtime's reconciles of Service objects (kcp mode's
	// runtime process only).
	reconciles int
	// refusedTokens: counter.refusedTokens.
	refusedTokens int
}

// mintedTokens is the number of TokenRequests that minted a token.
func (s snapshot) mintedTokens() int { return s.counts["tokenrequest"] - s.refusedTokens }

func (c *counter) snapshot() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := snapshot{counts: map[string]int{}, byResource: map[string]int{}, refusedTokens: c.refusedTokens}
	for k, v := range c.counts {
		s.counts[k] = v
	}
	for k, v := range c.byResource {
		s.byResource[k] = v
	}
	return s
}

// sub is s minus an earlier snapshot.
func (s snapshot) sub(earlier snapshot) snapshot {
	d := snapshot{counts: map[string]int{}, byResource: map[string]int{}, reconciles: s.reconciles - earlier.reconciles,
		refusedTokens: s.refusedTokens - earlier.refusedTokens}
	for k, v := range s.counts {
		d.counts[k] = v - earlier.counts[k]
	}
	for k, v := range s.byResource {
		if v-earlier.byResource[k] != 0 {
			d.byResource[k] = v - earlier.byResource[k]
		}
	}
	return d
}

func (s snapshot) total() int {
	n := 0
	for _, v := range s.counts {
		n += v
	}
	return n
}

func (s snapshot) writes() int {
	n := 0
	for v, c := range s.counts {
		if writeVerbs[v] {
			n += c
		}
	}
	return n
}

// leaseWrites counts the writes of Leases: the replicas' coordination.
func (s snapshot) leaseWrites() int {
	n := 0
	for k, c := range s.byResource {
		if verb, resource, _ := strings.Cut(k, " "); writeVerbs[verb] && resource == "leases" {
			n += c
		}
	}
	return n
}

// secretReads counts the reads of Secrets, one by one or listed.
func (s snapshot) secretReads() int {
	return s.byResource["get secrets"] + s.byResource["list secrets"]
}

// writeKinds lists the writes by verb and resource, most frequent first.
func (s snapshot) writeKinds() []string { return s.kinds(true) }

// readKinds lists the other requests by verb and resource, most frequent first.
func (s snapshot) readKinds() []string { return s.kinds(false) }

func (s snapshot) kinds(writes bool) []string {
	keys := make([]string, 0, len(s.byResource))
	for k := range s.byResource {
		verb, _, _ := strings.Cut(k, " ")
		if writeVerbs[verb] == writes {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.byResource[keys[i]] != s.byResource[keys[j]] {
			return s.byResource[keys[i]] > s.byResource[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// classify names a request's verb and resource from its method and path. It
// understands plain API paths and kcp's /clusters/<name>/ and virtual-workspace
// prefixes: everything before /api/ or /apis/ is ignored.
func classify(method string, u *url.URL) (verb, resource string) {
	p := u.Path
	i := strings.Index(p, "/api/")
	j := strings.Index(p, "/apis/")
	var segs []string
	switch {
	case i >= 0 && (j < 0 || i < j):
		segs = split(p[i+len("/api/"):]) // v1/...
		if len(segs) > 0 {
			segs = segs[1:]
		}
	case j >= 0:
		segs = split(p[j+len("/apis/"):]) // group/version/...
		if len(segs) >= 2 {
			segs = segs[2:]
		} else {
			segs = nil
		}
	}
	if len(segs) == 0 {
		return "discovery", ""
	}
	rest := segs
	if segs[0] == "namespaces" && len(segs) >= 3 {
		rest = segs[2:]
	}
	resource = rest[0]
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			return "watch", resource
		case len(rest) == 1:
			return "list", resource
		default:
			return "get", resource
		}
	case http.MethodPost:
		if len(rest) >= 3 && rest[2] == "token" {
			return "tokenrequest", resource
		}
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		return "delete", resource
	}
	return strings.ToLower(method), resource
}

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// quiesce waits until no request has passed the counter for quiet, at most max:
// a runtime that just started lists and watches before it serves, and those
// requests belong to its startup, not to the objects measured next.
func (c *counter) quiesce(quiet, max time.Duration) {
	quiesce(func() (snapshot, error) { return c.snapshot(), nil }, quiet, max)
}

// quiesce is counter.quiesce for counts read by snap (from another process).
func quiesce(snap func() (snapshot, error), quiet, max time.Duration) {
	total := func() int {
		s, err := snap()
		if err != nil {
			return -1
		}
		return s.total()
	}
	deadline := time.Now().Add(max)
	last, since := total(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if n := total(); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return
		}
	}
}
