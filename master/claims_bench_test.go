package master_test

import (
	"context"
	"fmt"
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
		Health: master.HealthConfig{Interval: time.Hour}, ClaimWait: 5 * time.Second}, st, storetest.Discard())
	return m, nodes, tk.ID
}

// BenchmarkClaim measures one fire claimed by every executor of a task
// (POST /api/worker/claim without HTTP): the round is decided as soon as all
// running executors have claimed. fleet is the number of running nodes.
func BenchmarkClaim(b *testing.B) {
	for _, dialect := range storetest.Dialects {
		for _, c := range []struct{ fleet, executors int }{{2, 1}, {2, 2}, {1000, 2}} {
			b.Run(fmt.Sprintf("%s/fleet-%d/executors-%d", dialect, c.fleet, c.executors), func(b *testing.B) {
				m, nodes, task := benchClaimSetup(b, benchStore(b, dialect), c.fleet, c.executors)
				ctx := context.Background()
				base := time.Now().Truncate(time.Second).Add(time.Hour)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					fire := base.Add(time.Duration(i) * time.Second)
					var wg sync.WaitGroup
					var mu sync.Mutex
					won := 0
					for _, n := range nodes {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r, err := m.Claim(ctx, n, protocol.ClaimRequest{TaskID: task, FireAt: fire})
							if err != nil {
								b.Error(err)
								return
							}
							if r.Won {
								mu.Lock()
								won++
								mu.Unlock()
							}
						}()
					}
					wg.Wait()
					if won != 1 {
						b.Fatalf("fire %d: %d winners", i, won)
					}
				}
			})
		}
	}
}
