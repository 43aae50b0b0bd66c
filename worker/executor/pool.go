package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// ErrPoolClosed is returned by Pool.Get after Close.
var ErrPoolClosed = errors.New("executor: the worker is stopping")

// ErrNoConnection is a run's error when the master sent no connection for
// its task: the task names one that is not defined (or was deleted).
var ErrNoConnection = errors.New("the task's connection is not defined in its project (nor for every project): define it, or name another")

// PoolOptions bound a Pool.
type PoolOptions struct {
	// Max is how many clients the pool keeps (16 when 0): the least
	// recently used beyond it is closed once no run uses it.
	Max int
	// Idle is how long an unused client is kept (5 minutes when 0).
	Idle time.Duration
}

// Pool keeps one client per connection (by its whole definition, so an
// edit makes a new client and the old one is closed once unused) for the
// runs of an executor: runs share a client instead of connecting at each
// fire. It is bounded in size, closes clients unused for a while, and
// builds a client once however many runs ask for it at the same time.
type Pool[T any] struct {
	open  func(ctx context.Context, c *protocol.ConnectionSpec) (T, error)
	close func(T) error
	opt   PoolOptions

	mu      sync.Mutex
	entries map[string]*poolEntry[T]
	closed  bool
	stop    chan struct{}
	janitor sync.WaitGroup
}

type poolEntry[T any] struct {
	key     string
	ready   chan struct{} // closed once client or err is set
	client  T
	err     error
	refs    int
	used    time.Time
	dropped bool // out of the map: closed when refs reach 0
}

// NewPool returns a pool that makes clients with open and ends them with
// close.
func NewPool[T any](open func(ctx context.Context, c *protocol.ConnectionSpec) (T, error), close func(T) error, opt PoolOptions) *Pool[T] {
	if opt.Max <= 0 {
		opt.Max = 16
	}
	if opt.Idle <= 0 {
		opt.Idle = 5 * time.Minute
	}
	return &Pool[T]{open: open, close: close, opt: opt, entries: map[string]*poolEntry[T]{}, stop: make(chan struct{})}
}

// Key is what a pool files a connection's client under: its whole
// definition, secret included, hashed.
func Key(c *protocol.ConnectionSpec) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Get returns the client of c, made if needed, and the func that gives it
// back; a run calls it when it no longer uses the client. A client that
// could not be made is not kept: the next run tries again.
func (p *Pool[T]) Get(ctx context.Context, c *protocol.ConnectionSpec) (T, func(), error) {
	var zero T
	if c == nil {
		return zero, func() {}, ErrNoConnection
	}
	key := Key(c)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return zero, func() {}, ErrPoolClosed
	}
	e, ok := p.entries[key]
	if !ok {
		e = &poolEntry[T]{key: key, ready: make(chan struct{})}
		p.entries[key] = e
		if len(p.entries) == 1 {
			p.janitor.Add(1)
			go p.sweep()
		}
		e.refs++
		p.mu.Unlock()
		client, err := p.open(ctx, c)
		p.mu.Lock()
		e.client, e.err, e.used = client, err, time.Now()
		close(e.ready)
		if err != nil {
			e.refs--
			p.dropLocked(e)
			p.mu.Unlock()
			return zero, func() {}, err
		}
		p.evictLocked()
		p.mu.Unlock()
		return client, p.releaser(e), nil
	}
	e.refs++
	p.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		p.release(e)
		return zero, func() {}, ctx.Err()
	}
	if e.err != nil {
		p.release(e)
		return zero, func() {}, e.err
	}
	return e.client, p.releaser(e), nil
}

func (p *Pool[T]) releaser(e *poolEntry[T]) func() {
	var once sync.Once
	return func() { once.Do(func() { p.release(e) }) }
}

func (p *Pool[T]) release(e *poolEntry[T]) {
	p.mu.Lock()
	e.refs--
	e.used = time.Now()
	closeIt := e.dropped && e.refs == 0 && e.err == nil
	p.mu.Unlock()
	if closeIt {
		_ = p.close(e.client)
	}
}

// dropLocked takes e out of the map; it is closed now if no run uses it
// (and it was made), else by its last release.
func (p *Pool[T]) dropLocked(e *poolEntry[T]) {
	if e.dropped {
		return
	}
	e.dropped = true
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	if e.refs == 0 && e.err == nil && isClosedChan(e.ready) {
		go func() { _ = p.close(e.client) }()
	}
}

// evictLocked drops the least recently used made clients beyond Max.
func (p *Pool[T]) evictLocked() {
	for len(p.entries) > p.opt.Max {
		var oldest *poolEntry[T]
		for _, e := range p.entries {
			if !isClosedChan(e.ready) {
				continue
			}
			if oldest == nil || e.used.Before(oldest.used) {
				oldest = e
			}
		}
		if oldest == nil {
			return
		}
		p.dropLocked(oldest)
	}
}

// sweep drops clients unused for Idle, until the pool is empty or closed.
func (p *Pool[T]) sweep() {
	defer p.janitor.Done()
	t := time.NewTicker(max(p.opt.Idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.mu.Lock()
			for _, e := range p.entries {
				if e.refs == 0 && isClosedChan(e.ready) && now.Sub(e.used) >= p.opt.Idle {
					p.dropLocked(e)
				}
			}
			// An empty pool needs no sweeper: the next Get starts one.
			if len(p.entries) == 0 {
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
		}
	}
}

// Len is how many clients the pool holds (made or being made).
func (p *Pool[T]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Close closes every client no run uses (the others when their runs give
// them back) and refuses new ones.
func (p *Pool[T]) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	var now []T
	for _, e := range p.entries {
		e.dropped = true
		delete(p.entries, e.key)
		if e.refs == 0 && e.err == nil && isClosedChan(e.ready) {
			now = append(now, e.client)
		}
	}
	p.mu.Unlock()
	p.janitor.Wait()
	var first error
	for _, c := range now {
		if err := p.close(c); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func isClosedChan(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
