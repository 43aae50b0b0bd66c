package master_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// BenchmarkPooledClaim measures the claim of one fire of a pooled task (its
// executors computed from the live members: 1,000 workers in 10 pools of
// 100, 1,000 tasks each selecting one pool), with the members still
// ("static") and with a worker moving to another pool every 10 fires
// ("churn", the move itself not timed): the cost per fire must not grow as
// members change.
func BenchmarkPooledClaim(b *testing.B) {
	for _, dialect := range storetest.Dialects {
		for _, churn := range []bool{false, true} {
			name := dialect + "/static"
			if churn {
				name = dialect + "/churn"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				st := benchStore(b, dialect)
				// A grace of a nanosecond: every claimant inserts at once,
				// so the figure is the executors' computation and one
				// write, not a rank's wait.
				m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
					Health: master.HealthConfig{Interval: time.Hour}, ClaimGrace: time.Nanosecond}, st, storetest.Discard())
				b.Cleanup(func() { m.Stop(context.Background()) })
				const workers, pools, tasks = 1000, 10, 1000
				nodes := make([]*store.Node, workers)
				for i := range workers {
					nodes[i] = &store.Node{Name: fmt.Sprintf("pw%04d", i), Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
						Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
						Mode: store.ModeAuto, Secret: protocol.NewSecret(), Labels: fmt.Sprintf(`{"pool":"p%d"}`, i%pools)}
					if err := store.CreateNode(ctx, st.DB, nodes[i]); err != nil {
						b.Fatal(err)
					}
				}
				ids := make([]string, tasks)
				for i := range tasks {
					in := httpInput()
					in.Title, in.Selector = fmt.Sprintf("pooled-%d", i), fmt.Sprintf("pool=p%d", i%pools)
					in.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
					tk, err := m.Tasks().Create(ctx, in, "admin")
					if err != nil {
						b.Fatal(err)
					}
					if err := store.SetTaskStatus(ctx, st.DB, tk.ID, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil {
						b.Fatal(err)
					}
					ids[i] = tk.ID
				}
				base := time.Now().Truncate(time.Second).Add(-2 * time.Hour)
				moved := 0
				// members of each pool, kept as the churn moves workers, so
				// that a member claims (a refused non-member would be cheap).
				members := make([][]string, pools)
				for i := range workers {
					members[i%pools] = append(members[i%pools], nodes[i].Name)
				}
				poolOf := func(name string) int {
					for p := range members {
						if slices.Contains(members[p], name) {
							return p
						}
					}
					return -1
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if churn && i%10 == 0 {
						b.StopTimer()
						w := nodes[moved%workers]
						moved++
						to := moved % pools
						if _, err := m.Nodes().SetLabels(ctx, w.Name, protocol.Labels{"pool": fmt.Sprintf("p%d", to)}); err != nil {
							b.Fatal(err)
						}
						if from := poolOf(w.Name); from != to {
							members[from] = slices.DeleteFunc(members[from], func(n string) bool { return n == w.Name })
							members[to] = append(members[to], w.Name)
						}
						b.StartTimer()
					}
					task := i % tasks
					// A member of the task's pool claims.
					fire := base.Add(time.Duration(i/tasks) * time.Second)
					mine := members[task%pools]
					n, err := store.GetNode(ctx, st.DB, mine[i%len(mine)])
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Claim(ctx, n, protocol.ClaimRequest{TaskID: ids[task], FireAt: fire}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
