package pgtest

import (
	"bytes"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards loopback TCP connections to a PostgreSQL server, and can
// silently stop forwarding on the connections open at a moment (Freeze):
// they stay open and carry nothing, as behind a firewall that dropped
// their state, while new connections work.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*proxied // not frozen yet
	all    []*proxied
	closed chan struct{}
}

type proxied struct {
	frozen      chan struct{} // closed by Freeze
	once        sync.Once
	a, b        net.Conn
	started     chan struct{} // closed once the startup message is seen
	replication bool          // the startup message asked for replication
}

// NewProxy starts a proxy to the server of dbURL and returns it with the URL
// that goes through it. It stops when the test ends.
func NewProxy(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parsing %s: %v", dbURL, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: u.Host, closed: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxied{frozen: make(chan struct{}), a: c, b: s, started: make(chan struct{})}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.all = append(p.all, pc)
		p.mu.Unlock()
		go p.pump(pc, c, s)
		go p.pump(pc, s, c)
	}
}

// pump copies src to dst until either fails or the connection is frozen;
// a frozen connection's data is held, never forwarded.
func (p *Proxy) pump(pc *proxied, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		if p.held(pc) {
			return
		}
		n, err := src.Read(buf)
		if src == pc.a && n > 0 {
			select {
			case <-pc.started:
			default:
				pc.replication = bytes.Contains(buf[:n], []byte("replication\x00database"))
				close(pc.started)
			}
		}
		if p.held(pc) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			dst.Close()
			return
		}
	}
}

// held reports whether pc is frozen, and if it is, first waits for the
// proxy to close: a frozen connection's data is never forwarded.
func (p *Proxy) held(pc *proxied) bool {
	select {
	case <-pc.frozen:
		<-p.closed
		return true
	default:
		return false
	}
}

// Freeze stops forwarding on every connection open now and returns how many.
func (p *Proxy) Freeze() int { return p.freeze(func(bool) bool { return true }) }

// FreezeQueries stops forwarding on every connection open now that is not a
// replication connection, and returns how many.
func (p *Proxy) FreezeQueries() int { return p.freeze(func(repl bool) bool { return !repl }) }

func (p *Proxy) freeze(which func(replication bool) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.conns[:0]
	n := 0
	for _, pc := range p.conns {
		<-pc.started
		if !which(pc.replication) {
			kept = append(kept, pc)
			continue
		}
		pc.once.Do(func() { close(pc.frozen) })
		n++
	}
	p.conns = kept
	return n
}

func (p *Proxy) close() {
	close(p.closed)
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.all {
		pc.a.Close()
		pc.b.Close()
	}
}
