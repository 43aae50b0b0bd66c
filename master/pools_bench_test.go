package master_test

import (
	"context"
	"errors"
	"fmt"
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
					tk, err := m.CreateTask(ctx, in, "admin")
					if err != nil {
						b.Fatal(err)
					}
					if err := store.SetTaskStatus(ctx, st.DB, tk.ID, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil {
						b.Fatal(err)
					}
					ids[i] = tk.ID
				}
				base := time.Now().Truncate(time.Second).Add(time.Minute)
				moved := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if churn && i%10 == 0 {
						b.StopTimer()
						w := nodes[moved%workers]
						moved++
						if _, err := m.SetNodeLabels(ctx, w.Name, protocol.Labels{"pool": fmt.Sprintf("p%d", moved%pools)}); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					task := i % tasks
					// A member of the task's pool claims.
					fire := base.Add(time.Duration(i/tasks) * time.Second)
					n, err := store.GetNode(ctx, st.DB, nodes[(task%pools)+pools*(i%7)].Name)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Claim(ctx, n, protocol.ClaimRequest{TaskID: ids[task], FireAt: fire}); err != nil && !isForbidden(err) {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// isForbidden: a worker that churn moved out of the task's pool is refused.
func isForbidden(err error) bool { return errors.Is(err, master.ErrForbidden) }
