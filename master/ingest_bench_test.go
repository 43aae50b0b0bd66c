package master_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// dbTimer sums the time statements (BEGIN and COMMIT included) spend in the
// database, across connections.
type dbTimer struct{ ns atomic.Int64 }

func (d *dbTimer) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (d *dbTimer) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	d.ns.Add(int64(time.Since(e.StartTime)))
}

// BenchmarkIngestRuns measures deliveries of 500 run reports (the worker
// reporter's batch) through the master engine into the database: one sender
// whose batches hold runs of one task or of 500 different tasks, and 10
// senders posting at once batches of 2,000 tasks they all execute (so that
// concurrent batches share tasks). runs/s is the ingest rate, db-µs/run the
// statement time per run summed over connections (SPEC 9 and issue 12:
// 10,000 runs/s on MariaDB, 5,000 on SQLite from 10 workers).
func BenchmarkIngestRuns(b *testing.B) {
	const batch = 500
	for _, dialect := range storetest.Dialects {
		for _, c := range []struct{ tasks, senders int }{{1, 1}, {500, 1}, {2000, 10}} {
			name := fmt.Sprintf("%s/tasks-%d", dialect, c.tasks)
			if c.senders > 1 {
				name += fmt.Sprintf("/senders-%d", c.senders)
			}
			b.Run(name, func(b *testing.B) {
				st := benchStore(b, dialect)
				timer := &dbTimer{}
				st.DB.AddQueryHook(timer)
				ctx := context.Background()
				var nodes []*store.Node
				var names []string
				for i := 0; i < c.senders; i++ {
					node := &store.Node{Name: fmt.Sprintf("iw%d", i+1), Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
						Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
						Mode: store.ModeAuto, Secret: protocol.NewSecret()}
					if err := store.CreateNode(ctx, st.DB, node); err != nil {
						b.Fatal(err)
					}
					nodes = append(nodes, node)
					names = append(names, node.Name)
				}
				ids := make([]string, c.tasks)
				for i := range ids {
					ids[i] = fmt.Sprintf("t-ingest-%04d", i)
					tk := &store.Task{ID: ids[i], Title: "ingest", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
						Spec:      fmt.Sprintf(`{"id":%q,"title":"ingest","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`, ids[i]),
						Executors: names}
					if err := store.CreateTask(ctx, st.DB, tk); err != nil {
						b.Fatal(err)
					}
				}
				m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
					Health: master.HealthConfig{Interval: time.Hour}}, st, storetest.Discard())
				code := 0
				mk := func(node string, offset int) []protocol.RunReport {
					now := time.Now().UTC()
					runs := make([]protocol.RunReport, batch)
					for j := range runs {
						runs[j] = protocol.RunReport{ID: uuid.NewString(), TaskID: ids[(offset+j)%c.tasks], Node: node,
							ScheduledAt: now.Truncate(time.Second), StartedAt: now, EndedAt: now.Add(3 * time.Millisecond), DurationMS: 3,
							Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, ExitCode: &code, Output: `{"ok":true}`}
					}
					return runs
				}
				var took time.Duration
				var dbNS int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					batches := make([][]protocol.RunReport, len(nodes))
					for k, n := range nodes {
						batches[k] = mk(n.Name, (i*len(nodes)+k)*batch)
					}
					db0 := timer.ns.Load()
					b.StartTimer()
					t0 := time.Now()
					var wg sync.WaitGroup
					errs := make(chan error, len(nodes))
					for k, n := range nodes {
						wg.Add(1)
						go func() {
							defer wg.Done()
							r, err := m.Runs().Ingest(ctx, n, batches[k])
							if err == nil && r.Accepted != batch {
								err = fmt.Errorf("accepted %d of %d: %+v", r.Accepted, batch, r)
							}
							errs <- err
						}()
					}
					wg.Wait()
					took += time.Since(t0)
					dbNS += timer.ns.Load() - db0
					close(errs)
					for err := range errs {
						if err != nil {
							b.Fatalf("IngestRuns: %v", err)
						}
					}
				}
				runs := float64(batch * len(nodes) * b.N)
				b.ReportMetric(runs/took.Seconds(), "runs/s")
				b.ReportMetric(float64(dbNS)/1e3/runs, "db-µs/run")
			})
		}
	}
}
