package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker/executor"
)

type fakeClient struct {
	name   string
	closed atomic.Bool
}

type counts struct{ opened, closed atomic.Int32 }

func newPool(t *testing.T, opt executor.PoolOptions, gate chan struct{}, fail *atomic.Bool) (*executor.Pool[*fakeClient], *counts) {
	t.Helper()
	c := &counts{}
	p := executor.NewPool(func(ctx context.Context, conn *protocol.ConnectionSpec) (*fakeClient, error) {
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if fail != nil && fail.Load() {
			return nil, errors.New("connection refused")
		}
		c.opened.Add(1)
		return &fakeClient{name: conn.Name}, nil
	}, func(f *fakeClient) error {
		if f.closed.Swap(true) {
			t.Errorf("client %s closed twice", f.name)
		}
		c.closed.Add(1)
		return nil
	}, opt)
	t.Cleanup(func() { _ = p.Close() })
	return p, c
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPoolMakesOneClientForRunsAskingAtOnce: fifty runs asking for one
// connection at once get one client, made once; another definition of the
// connection (an edit) gets another.
func TestPoolMakesOneClientForRunsAskingAtOnce(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	p, c := newPool(t, executor.PoolOptions{}, gate, nil)
	conn := &protocol.ConnectionSpec{Name: "bus", Kind: protocol.ConnNATS, Address: "a:1", Version: 1}
	var wg sync.WaitGroup
	got := make([]*fakeClient, 50)
	for i := range got {
		wg.Go(func() {
			cl, release, err := p.Get(context.Background(), conn)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = cl
			release()
		})
	}
	// The first open waits at the gate until the pool holds its entry:
	// the runs started meanwhile wait for that one open.
	waitFor(t, "the first open", func() bool { return p.Len() == 1 })
	close(gate)
	wg.Wait()
	for _, cl := range got {
		if cl != got[0] {
			t.Fatal("runs got different clients for one connection")
		}
	}
	if c.opened.Load() != 1 || p.Len() != 1 {
		t.Fatalf("opened %d, pool holds %d; want 1 and 1", c.opened.Load(), p.Len())
	}
	edited := *conn
	edited.Version = 2
	if cl, release, err := p.Get(context.Background(), &edited); err != nil || cl == got[0] {
		t.Fatalf("an edited connection: %v, same client %v", err, cl == got[0])
	} else {
		release()
	}
}

// TestPoolBoundsIdlesAndCloses: beyond Max the least recently used client
// is closed once no run holds it; a client unused for Idle is closed; a
// failed open is not kept; Close closes what is left and refuses more.
func TestPoolBoundsIdlesAndCloses(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	p, c := newPool(t, executor.PoolOptions{Max: 2, Idle: 100 * time.Millisecond}, nil, &fail)
	conn := func(n string) *protocol.ConnectionSpec {
		return &protocol.ConnectionSpec{Name: n, Kind: protocol.ConnRedis, Address: "a:1"}
	}
	a, releaseA, err := p.Get(context.Background(), conn("a"))
	if err != nil {
		t.Fatal(err)
	}
	_, releaseB, _ := p.Get(context.Background(), conn("b"))
	releaseB()
	_, releaseC, _ := p.Get(context.Background(), conn("c"))
	// a is the oldest but still held: dropped from the pool, not closed.
	if p.Len() != 2 || a.closed.Load() {
		t.Fatalf("len %d, a closed %v", p.Len(), a.closed.Load())
	}
	releaseA()
	if !a.closed.Load() {
		t.Fatal("a dropped client was not closed when its last run gave it back")
	}
	releaseC()
	waitFor(t, "idle clients closed", func() bool { return p.Len() == 0 && c.closed.Load() == c.opened.Load() })

	fail.Store(true)
	if _, _, err := p.Get(context.Background(), conn("d")); err == nil || p.Len() != 0 {
		t.Fatalf("a failed open: %v, pool holds %d", err, p.Len())
	}
	fail.Store(false)
	_, release, err := p.Get(context.Background(), conn("d"))
	if err != nil {
		t.Fatalf("the next run after a failed open: %v", err)
	}
	release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if c.closed.Load() != c.opened.Load() {
		t.Fatalf("after Close %d of %d clients closed", c.closed.Load(), c.opened.Load())
	}
	if _, _, err := p.Get(context.Background(), conn("e")); !errors.Is(err, executor.ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, _, err := p.Get(context.Background(), nil); err == nil {
		t.Fatal("a run without a connection got a client")
	}
}
