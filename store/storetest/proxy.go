package storetest

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// Proxy is a TCP proxy on loopback in front of a database server, so a test
// can take the database away for real (Cut) and bring it back (Restore).
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// NewProxy listens on an ephemeral loopback port and forwards to target. It
// stops at the end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
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
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// OpenMySQLProxied is OpenMySQL with the store's connections going through a
// Proxy the test controls. Without SM_TEST_MYSQL_DSN it skips.
func OpenMySQLProxied(t testing.TB) (NamedStore, *Proxy) {
	t.Helper()
	conn := MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(conn)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr()
	cfg.Timeout = 2e9 // dial: a cut proxy refuses at once anyway
	dsn, err := store.ParseDSN("mysql://"+strings.TrimPrefix(cfg.FormatDSN(), "mysql://"), "")
	if err != nil {
		t.Fatalf("parse MySQL DSN: %v", err)
	}
	return openDSN(t, "mysql", dsn), p
}
