package master

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cacheClock is a settable clock for the read cache.
type cacheClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *cacheClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *cacheClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setupReadCache(t *testing.T) (*readCache, *cacheClock) {
	t.Helper()
	life := newLifecycle()
	t.Cleanup(func() { life.stop(nil) })
	clock := &cacheClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReadCache(life)
	c.now, c.large = clock.now, 100
	return c, clock
}

// counter is a compute function returning how often it ran and a fixed
// number of rows.
func counter(calls *atomic.Int64, rows *atomic.Int64) func(context.Context) (any, int, error) {
	return func(context.Context) (any, int, error) {
		return int(calls.Add(1)), int(rows.Load()), nil
	}
}

func TestReadCacheCountsASmallEstateEveryTime(t *testing.T) {
	t.Parallel()
	c, _ := setupReadCache(t)
	var calls, rows atomic.Int64
	rows.Store(99)
	for i := 1; i <= 3; i++ {
		v, _, err := c.get(t.Context(), "k", counter(&calls, &rows))
		if err != nil || v.(int) != i {
			t.Fatalf("get %d = %v, %v; want a fresh count %d", i, v, err, i)
		}
	}
}

func TestReadCacheKeepsALargeEstateAndRefreshesInTheBackground(t *testing.T) {
	t.Parallel()
	c, clock := setupReadCache(t)
	var calls, rows atomic.Int64
	rows.Store(100)
	f := counter(&calls, &rows)
	v, at, err := c.get(t.Context(), "k", f)
	if err != nil || v.(int) != 1 || !at.Equal(clock.now()) {
		t.Fatalf("first get = %v at %v, %v", v, at, err)
	}
	clock.add(ReadCacheTTL - time.Second)
	if v, _, _ := c.get(t.Context(), "k", f); v.(int) != 1 || calls.Load() != 1 {
		t.Fatalf("within the TTL: got %v after %d counts; want the kept 1 and no new count", v, calls.Load())
	}
	clock.add(time.Second)
	// Stale: every reader gets the kept value at once, one refresh runs.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if v, _, _ := c.get(t.Context(), "k", f); v.(int) < 1 {
				t.Errorf("stale get = %v", v)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _, _ := c.get(t.Context(), "k", f)
		if v.(int) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refresh never landed: get = %v", v)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d counts for one stale period, want 2 (the first and one refresh)", n)
	}
}

func TestReadCacheDropsAnEstateThatShrank(t *testing.T) {
	t.Parallel()
	c, clock := setupReadCache(t)
	var calls, rows atomic.Int64
	rows.Store(500)
	f := counter(&calls, &rows)
	c.get(t.Context(), "k", f)
	rows.Store(3)
	clock.add(ReadCacheTTL)
	c.get(t.Context(), "k", f) // stale: starts the refresh that finds it small
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		_, kept := c.entries["k"]
		c.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a small estate stayed in the cache")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := calls.Load()
	if v, _, _ := c.get(t.Context(), "k", f); v.(int) != int(before)+1 {
		t.Fatalf("get = %v, want a fresh count %d", v, before+1)
	}
}

func TestReadCacheErrorsAreNotKept(t *testing.T) {
	t.Parallel()
	c, _ := setupReadCache(t)
	_, _, err := c.get(t.Context(), "k", func(context.Context) (any, int, error) { return nil, 1000, fmt.Errorf("database down") })
	if err == nil {
		t.Fatal("an error was not returned")
	}
	var calls, rows atomic.Int64
	rows.Store(1000)
	if v, _, err := c.get(t.Context(), "k", counter(&calls, &rows)); err != nil || v.(int) != 1 {
		t.Fatalf("after an error: %v, %v; want a fresh count", v, err)
	}
}

func TestReadCacheIsBounded(t *testing.T) {
	t.Parallel()
	c, clock := setupReadCache(t)
	var calls, rows atomic.Int64
	rows.Store(1000)
	for i := range readCacheEntries + 50 {
		clock.add(time.Millisecond)
		c.get(t.Context(), fmt.Sprint("k", i), counter(&calls, &rows))
	}
	c.mu.Lock()
	n := len(c.entries)
	_, oldest := c.entries["k0"]
	_, newest := c.entries[fmt.Sprint("k", readCacheEntries+49)]
	c.mu.Unlock()
	if n != readCacheEntries || oldest || !newest {
		t.Fatalf("%d entries (oldest kept %v, newest kept %v); want %d, the oldest gone", n, oldest, newest, readCacheEntries)
	}
}

func TestProjectsKeyTellsNilFromEmpty(t *testing.T) {
	t.Parallel()
	if a, b, c := projectsKey(nil), projectsKey([]int64{}), projectsKey([]int64{3, 1}); a == b || c != projectsKey([]int64{1, 3}) {
		t.Fatalf("keys %q %q %q: nil and empty must differ, order must not matter", a, b, c)
	}
}

// TestReadCacheFirstCountOutlivesAViewThatGaveUp: a first count longer than
// the view's deadline is not cancelled with it; views asking meanwhile share
// it; once it lands (a large estate) the next view is served from it.
func TestReadCacheFirstCountOutlivesAViewThatGaveUp(t *testing.T) {
	t.Parallel()
	c, _ := setupReadCache(t)
	var calls atomic.Int64
	release := make(chan struct{})
	slow := func(ctx context.Context) (any, int, error) {
		calls.Add(1)
		select {
		case <-release:
			return "counted", 1000, nil
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := c.get(short, "k", slow); err == nil {
		t.Fatal("a view past its deadline got a value")
	}
	// A second view while the count runs waits on it: no second count.
	short2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if _, _, err := c.get(short2, "k", slow); err == nil || calls.Load() > 1 {
		t.Fatalf("a second view during the count: %v, %d counts; want its deadline and one count", err, calls.Load())
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if v, _, err := c.get(t.Context(), "k", slow); err != nil || v != "counted" {
				t.Errorf("a waiting view got %v, %v", v, err)
			}
		})
	}
	close(release)
	wg.Wait()
	if v, _, err := c.get(t.Context(), "k", slow); err != nil || v != "counted" {
		t.Fatalf("after the count: %v, %v", v, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d counts, want the one every view shared", n)
	}
}
