package master_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// BenchmarkIngestRuns measures one delivery of 500 run reports (the worker
// reporter's batch) through the master engine into the database, for batches
// that hold runs of one task and of 500 different tasks. runs/s is the
// single-sender ingest rate (SPEC 9: at least 2,000 runs/s end to end).
func BenchmarkIngestRuns(b *testing.B) {
	const batch = 500
	for _, dialect := range storetest.Dialects {
		for _, tasks := range []int{1, 500} {
			b.Run(fmt.Sprintf("%s/tasks-%d", dialect, tasks), func(b *testing.B) {
				st := benchStore(b, dialect)
				ctx := context.Background()
				node := &store.Node{Name: "iw1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
					Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
					Mode: store.ModeAuto, Secret: protocol.NewSecret()}
				if err := store.CreateNode(ctx, st.DB, node); err != nil {
					b.Fatal(err)
				}
				ids := make([]string, tasks)
				for i := range ids {
					ids[i] = fmt.Sprintf("t-ingest-%04d", i)
					tk := &store.Task{ID: ids[i], Title: "ingest", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
						Spec:      fmt.Sprintf(`{"id":%q,"title":"ingest","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`, ids[i]),
						Executors: []string{node.Name}}
					if err := store.CreateTask(ctx, st.DB, tk); err != nil {
						b.Fatal(err)
					}
				}
				m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
					Health: master.HealthConfig{Interval: time.Hour}}, st, storetest.Discard())
				code := 0
				mk := func() []protocol.RunReport {
					now := time.Now().UTC()
					runs := make([]protocol.RunReport, batch)
					for j := range runs {
						runs[j] = protocol.RunReport{ID: uuid.NewString(), TaskID: ids[j%tasks], Node: node.Name,
							ScheduledAt: now.Truncate(time.Second), StartedAt: now, EndedAt: now.Add(3 * time.Millisecond), DurationMS: 3,
							Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, ExitCode: &code, Output: `{"ok":true}`}
					}
					return runs
				}
				var took time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					runs := mk()
					b.StartTimer()
					t0 := time.Now()
					r, err := m.IngestRuns(ctx, node, runs)
					took += time.Since(t0)
					if err != nil || r.Accepted != batch {
						b.Fatalf("IngestRuns: %+v, %v", r, err)
					}
				}
				b.ReportMetric(float64(batch*b.N)/took.Seconds(), "runs/s")
			})
		}
	}
}
