package master_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// BenchmarkSweepHealthHistory measures a sweep of 4,000 healthy workers with
// the health history written for every probe (the first sweep of a new
// leader, or SampleEvery shorter than the interval) against the usual sweep
// that writes none (within SampleEvery of the last sample), on both databases.
func BenchmarkSweepHealthHistory(b *testing.B) {
	for _, dialect := range storetest.Dialects {
		for _, c := range []struct {
			name  string
			every time.Duration
		}{{"every-probe", time.Nanosecond}, {"none-due", time.Hour}} {
			b.Run(dialect+"/"+c.name, func(b *testing.B) {
				const n = 4000
				st := benchStore(b, dialect)
				f := newBenchFleet(b, st, n, 0)
				m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
					Health: master.HealthConfig{Interval: time.Hour, Timeout: time.Second, MaxFailures: 1000, SampleEvery: c.every}},
					st, storetest.Discard())
				ctx := context.Background()
				m.Sweep(ctx) // the first sweep records every node either way
				count := func() int {
					var rows int
					if err := st.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM node_health").Scan(&rows); err != nil {
						b.Fatal(err)
					}
					return rows
				}
				before := count()
				var total time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					f.reset(b, st)
					b.StartTimer()
					t0 := time.Now()
					if r := m.Sweep(ctx); r.Probed != n {
						b.Fatalf("sweep: %+v", r)
					}
					total += time.Since(t0)
				}
				b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/sweep")
				b.ReportMetric(float64(count()-before)/float64(b.N), "samples/sweep")
			})
		}
	}
}
