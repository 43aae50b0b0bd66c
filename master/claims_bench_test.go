package master_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// benchClaimSetup stores `fleet` running workers and one running task whose
// executors are the first `executors` of them.
func benchClaimSetup(b *testing.B, st *store.Store, fleet, executors int) (*master.Master, []*store.Node, string) {
	b.Helper()
	ctx := context.Background()
	var nodes []*store.Node
	var names []string
	for i := 0; i < fleet; i++ {
		n := &store.Node{Name: fmt.Sprintf("cw%05d", i), Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
			Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
			Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(ctx, st.DB, n); err != nil {
			b.Fatal(err)
		}
		if i < executors {
			nodes, names = append(nodes, n), append(names, n.Name)
		}
	}
	tk := &store.Task{ID: "t-bench-claims", Title: "claims", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t-bench-claims","title":"claims","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: names}
	if err := store.CreateTask(ctx, st.DB, tk); err != nil {
		b.Fatal(err)
	}
	m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour}}, st, storetest.Discard())
	b.Cleanup(func() { m.Stop(context.Background()) })
	return m, nodes, tk.ID
}

// BenchmarkClaim measures one fire claimed by every executor of a task
// (POST /api/worker/claim without HTTP), the executors taking turns between
// two masters on one database: every claim is answered as soon as the
// top-ranked executor's claim is in the database. fleet is the number of
// running nodes. It reports the p50 and p99 latency of a single claim.
func BenchmarkClaim(b *testing.B) {
	for _, dialect := range storetest.Dialects {
		for _, c := range []struct{ fleet, executors int }{{2, 1}, {2, 2}, {1000, 2}, {3, 3}} {
			b.Run(fmt.Sprintf("%s/fleet-%d/executors-%d", dialect, c.fleet, c.executors), func(b *testing.B) {
				st := benchStore(b, dialect)
				m, nodes, task := benchClaimSetup(b, st, c.fleet, c.executors)
				m2 := master.New(master.Config{Identity: "master-b", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:2",
					Health: master.HealthConfig{Interval: time.Hour}}, st, storetest.Discard())
				b.Cleanup(func() { m2.Stop(context.Background()) })
				masters := []*master.Master{m, m2}
				ctx := context.Background()
				// Past fires: a claim may name a fire up to MaxClaimAge
				// back, but at most ClaimSkew ahead.
				base := time.Now().Truncate(time.Second).Add(-2 * time.Hour)
				lat := make([]time.Duration, 0, b.N*len(nodes))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					fire := base.Add(time.Duration(i) * time.Second)
					var wg sync.WaitGroup
					var mu sync.Mutex
					won := 0
					for j, n := range nodes {
						wg.Add(1)
						go func() {
							defer wg.Done()
							start := time.Now()
							r, err := masters[(i+j)%2].Claim(ctx, n, protocol.ClaimRequest{TaskID: task, FireAt: fire})
							took := time.Since(start)
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							lat = append(lat, took)
							if r.Won {
								won++
							}
							mu.Unlock()
						}()
					}
					wg.Wait()
					if won != 1 {
						b.Fatalf("fire %d: %d winners", i, won)
					}
				}
				b.StopTimer()
				slices.Sort(lat)
				if len(lat) > 0 {
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				}
			})
		}
	}
}
