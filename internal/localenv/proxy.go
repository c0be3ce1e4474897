package localenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"

	"k8s.io/client-go/rest"
)

// Proxy is a TCP proxy in front of a server, which a test can cut off and restore to
// make the server unreachable for a while without stopping it. While cut, it accepts
// connections and closes them at once, and it has closed every connection that was
// open: a client sees what it sees when a load balancer or the network drops it.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// StartProxy proxies to the server of cfg on a free local port and returns a copy of
// cfg pointing at the proxy. The server's certificate stays valid: it names 127.0.0.1
// whatever the port. Stop closes it.
func (e *Env) StartProxy(cfg *rest.Config) (*Proxy, *rest.Config, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy target %q: %w", cfg.Host, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("proxy listener: %w", err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	go p.serve()
	e.onStop("proxy to "+u.Host, func() error { _ = ln.Close(); p.Cut(); return nil })
	out := rest.CopyConfig(cfg)
	out.Host = u.Scheme + "://" + ln.Addr().String()
	return p, out, nil
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go p.pipe(c)
	}
}

// pipe copies between the client and a new connection to the target.
func (p *Proxy) pipe(client net.Conn) {
	if !p.track(client) {
		_ = client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		_ = client.Close()
		if server != nil {
			_ = server.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	_ = client.Close()
	_ = server.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// track registers c unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}
