// A cache for the console's aggregate reads of a large estate.

package master

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// LargeEstateRows is where an aggregate read (the dashboard's counters,
	// the runs chart) stops being exact on every view: below it, each view
	// counts afresh; from it on, the counts are kept for ReadCacheTTL and
	// refreshed in the background, so a dashboard costs the same at 100 and
	// at 100,000 tasks.
	LargeEstateRows = 10_000
	// ReadCacheTTL is how old the counts of a large estate may be.
	ReadCacheTTL = 10 * time.Second
	// readCacheEntries bounds the cache: one entry per read and project set.
	readCacheEntries = 256
	// readRefreshTimeout bounds a background refresh.
	readRefreshTimeout = time.Minute
)

// readCache keeps the results of aggregate reads whose last count reached
// LargeEstateRows. A stale entry is served while one refresh runs in the
// background, so no view waits for a count over the whole estate once the
// first one is done. The first count of a key is shared by the views that
// ask for it meanwhile and runs in the background too: a view that gives up
// (its request deadline) does not cancel it, so a count longer than a
// request's deadline still lands in the cache for the next view.
type readCache struct {
	mu      sync.Mutex
	entries map[string]*readEntry
	// pending are the first counts under way, by key.
	pending map[string]*readFlight
	now     func() time.Time
	// life runs the counts, so the engine's Stop waits for them.
	life *lifecycle
	// large is where counts start being kept (LargeEstateRows).
	large int
}

type readEntry struct {
	val        any
	at         time.Time
	refreshing bool
}

// readFlight is a first count under way; done closes when it ends.
type readFlight struct {
	done chan struct{}
	val  any
	at   time.Time
	err  error
}

func newReadCache(life *lifecycle) *readCache {
	return &readCache{entries: map[string]*readEntry{}, pending: map[string]*readFlight{}, now: time.Now, life: life, large: LargeEstateRows}
}

// projectsKey names a project set: "*" for every project (nil).
func projectsKey(projects []int64) string {
	if projects == nil {
		return "*"
	}
	ids := slices.Sorted(slices.Values(projects))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// get returns the value of key: the kept one when the estate is large (a
// stale one starts a refresh), otherwise a fresh count by compute, which
// also says how many rows it counted. The value's time is when it was
// computed. compute must not depend on ctx's values: it may run for another
// caller or after ctx ends.
func (c *readCache) get(ctx context.Context, key string, compute func(context.Context) (any, int, error)) (any, time.Time, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		v, at := e.val, e.at
		if c.now().Sub(at) >= ReadCacheTTL && !e.refreshing {
			e.refreshing = c.life.goBackground(func(ctx context.Context) { c.refresh(ctx, key, e, compute) })
		}
		c.mu.Unlock()
		return v, at, nil
	}
	f, ok := c.pending[key]
	if !ok {
		f = &readFlight{done: make(chan struct{}), at: c.now()}
		c.pending[key] = f
		if !c.life.goBackground(func(ctx context.Context) { c.first(ctx, key, f, compute) }) {
			// The engine is stopping: count for this view alone.
			delete(c.pending, key)
			c.mu.Unlock()
			v, _, err := compute(ctx)
			return v, f.at, err
		}
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.at, f.err
	case <-ctx.Done():
		return nil, f.at, ctx.Err()
	}
}

// first runs the first count of key for every view waiting on f and keeps
// it when the estate is large.
func (c *readCache) first(ctx context.Context, key string, f *readFlight, compute func(context.Context) (any, int, error)) {
	ctx, cancel := context.WithTimeout(ctx, readRefreshTimeout)
	defer cancel()
	v, rows, err := compute(ctx)
	c.mu.Lock()
	f.val, f.err = v, err
	delete(c.pending, key)
	if err == nil && rows >= c.large {
		c.putLocked(key, &readEntry{val: v, at: f.at})
	}
	c.mu.Unlock()
	close(f.done)
}

// refresh computes key again for an entry being served stale; an estate
// that is no longer large leaves the cache.
func (c *readCache) refresh(ctx context.Context, key string, e *readEntry, compute func(context.Context) (any, int, error)) {
	ctx, cancel := context.WithTimeout(ctx, readRefreshTimeout)
	defer cancel()
	at := c.now()
	v, rows, err := compute(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refreshing = false
	switch {
	case err != nil:
		// Keep serving the old counts; the next view tries again.
	case rows < c.large:
		if c.entries[key] == e {
			delete(c.entries, key)
		}
	default:
		e.val, e.at = v, at
	}
}

func (c *readCache) putLocked(key string, e *readEntry) {
	if len(c.entries) >= readCacheEntries {
		// Project sets come and go with their readers: the oldest goes.
		var oldest string
		for k, o := range c.entries {
			if oldest == "" || o.at.Before(c.entries[oldest].at) {
				oldest = k
			}
		}
		delete(c.entries, oldest)
	}
	c.entries[key] = e
}
