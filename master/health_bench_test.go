package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// benchFleet is n worker endpoints on loopback, one listener each; every
// hungEvery-th accepts connections and never answers. Their nodes are running
// rows of a real SQLite store.
type benchFleet struct {
	srv  *http.Server
	lns  []net.Listener
	hung []string
	mu   sync.Mutex
	held []net.Conn
}

func newBenchFleet(b *testing.B, st *store.Store, n, hungEvery int) *benchFleet {
	b.Helper()
	f := &benchFleet{}
	answers := map[int][]byte{}
	f.srv = &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		addr := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(answers[addr.Port])
	})}
	var nodes []store.Node
	var healthy []net.Listener
	now := time.Now().UTC()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.close()
			b.Fatalf("listener %d: %v", i, err)
		}
		f.lns = append(f.lns, ln)
		name := fmt.Sprintf("bw%05d", i)
		nodes = append(nodes, store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: ln.Addr().String(),
			Secret: "s", Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 20,
			LastSeen: now, BootID: "boot", Mode: store.ModeAuto, CreatedAt: now, UpdatedAt: now})
		if hungEvery > 0 && i%hungEvery == hungEvery-1 {
			f.hung = append(f.hung, name)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					f.mu.Lock()
					f.held = append(f.held, c)
					f.mu.Unlock()
				}
			}()
			continue
		}
		answers[ln.Addr().(*net.TCPAddr).Port], _ = json.Marshal(protocol.HealthResponse{Node: name, BootID: "boot", Status: protocol.StateScheduling})
		healthy = append(healthy, ln)
	}
	for _, ln := range healthy {
		go func() { _ = f.srv.Serve(ln) }()
	}
	b.Cleanup(f.close)
	ctx := context.Background()
	for len(nodes) > 0 {
		part := nodes[:min(500, len(nodes))]
		nodes = nodes[len(part):]
		if _, err := st.DB.NewInsert().Model(&part).Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

// benchStore opens a fresh migrated store of the dialect without logging
// (storetest's stores log through b.Log, which floods benchmark output).
// MySQL needs SM_TEST_MYSQL_DSN and PostgreSQL SM_TEST_PG_DSN, as in the
// tests; without it the benchmark skips.
func benchStore(b *testing.B, dialect string) *store.Store {
	b.Helper()
	dsn, err := store.ParseDSN(storetest.FreshDSN(b, dialect), "")
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(context.Background(), dsn, storetest.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func (f *benchFleet) close() {
	_ = f.srv.Close()
	for _, ln := range f.lns {
		_ = ln.Close()
	}
	f.mu.Lock()
	for _, c := range f.held {
		_ = c.Close()
	}
	f.held = nil
	f.mu.Unlock()
}

// reset makes every worker running again with no failures counted.
func (f *benchFleet) reset(b *testing.B, st *store.Store) {
	_, err := st.DB.NewUpdate().Model((*store.Node)(nil)).Set("status = ?", store.StatusRunning).Set("failures = 0").
		Where("type = ?", store.TypeWorker).Exec(context.Background())
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSweep measures one health sweep of a fleet (SPEC 9: 1,000 workers
// with 10% hung within 1.5 × the probe timeout; 10,000 healthy under 2 s; the
// full-size figures come from cmd/smbench). The metric x-timeout is the sweep
// time over the probe timeout.
func BenchmarkSweep(b *testing.B) {
	for _, c := range []struct {
		name      string
		n, hung   int
		timeout   time.Duration
		conc      int
		wantRatio bool
	}{
		{"healthy-1000", 1000, 0, time.Second, 256, false},
		{"healthy-4000", 4000, 0, time.Second, 256, false},
		{"hung10pct-1000", 1000, 10, 300 * time.Millisecond, 256, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := benchStore(b, string(store.SQLite))
			f := newBenchFleet(b, st, c.n, c.hung)
			m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
				Health: master.HealthConfig{Interval: time.Hour, Timeout: c.timeout, MaxFailures: 1000, Concurrency: c.conc}},
				st, storetest.Discard())
			ctx := context.Background()
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f.reset(b, st)
				b.StartTimer()
				t0 := time.Now()
				r := m.Sweep(ctx)
				total += time.Since(t0)
				if r.Probed != c.n || r.Failed != len(f.hung) {
					b.Fatalf("sweep: %+v, want %d probed and %d failed", r, c.n, len(f.hung))
				}
			}
			if c.wantRatio {
				b.ReportMetric(float64(total)/float64(b.N)/float64(c.timeout), "x-timeout")
			}
			b.ReportMetric(float64(c.n)*float64(b.N)/total.Seconds(), "probes/s")
		})
	}
}
