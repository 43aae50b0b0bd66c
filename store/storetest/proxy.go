package storetest

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// Proxy is a TCP proxy on loopback in front of a database server, so a test
// can take the database away for real, refused (Cut) or blackholed (Hang),
// and bring it back (Restore).
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	held  chan struct{} // non-nil while hung; closed when the hang ends
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

// Cut closes every proxied connection and refuses new ones until Restore;
// it ends a Hang.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Hang blackholes the database until Restore: connections, old and new, are
// accepted and kept open, but nothing is forwarded either way, as when a
// database server freezes or a network drops its packets. A client sees no
// error, only no answer.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Restore lets connections through again. After a Hang, the connections that
// were held are closed (their clients gave up on them long ago; what they
// sent is never delivered), so only fresh connections reach the database.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.held != nil {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
		close(p.held)
		p.held = nil
	}
}

// hold blocks while the proxy hangs; false means the hang ended and c was
// closed meanwhile (or the proxy is cut), so nothing more may pass.
func (p *Proxy) hold(c net.Conn) bool {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held == nil {
		return true
	}
	<-held
	p.mu.Lock()
	defer p.mu.Unlock()
	_, open := p.conns[c]
	return open && !p.cut
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
	p.conns[c] = struct{}{} // so that Cut and Restore close it while it is held
	p.mu.Unlock()
	if !p.hold(c) {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if _, open := p.conns[c]; p.cut || !open {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) { p.copy(dst, src, c); done <- struct{}{} }
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

// copy forwards src to dst until either fails; while the proxy hangs, what
// was read is held back, and is dropped if the hang ends by closing c.
func (p *Proxy) copy(dst, src, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
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

// OpenPostgresProxied is OpenPostgres with the store's connections going
// through a Proxy the test controls. Without SM_TEST_PG_DSN it skips.
func OpenPostgresProxied(t testing.TB) (NamedStore, *Proxy) {
	t.Helper()
	u, err := url.Parse(PostgresDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2") // a cut proxy refuses at once anyway
	u.RawQuery = q.Encode()
	dsn, err := store.ParseDSN(u.String(), "")
	if err != nil {
		t.Fatalf("parse PostgreSQL DSN: %v", err)
	}
	return openDSN(t, "postgres", dsn), p
}

// OpenProxied is OpenMySQLProxied or OpenPostgresProxied, by dialect.
func OpenProxied(t testing.TB, dialect string) (NamedStore, *Proxy) {
	t.Helper()
	if dialect == "postgres" {
		return OpenPostgresProxied(t)
	}
	return OpenMySQLProxied(t)
}
