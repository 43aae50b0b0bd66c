package store_test

import (
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestNodeHealthHistory: samples are stored in one go, read back per node
// oldest first (the newest limit of them, from since on), and pruned by age.
func TestNodeHealthHistory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
		var rows []store.HealthSample
		for i := range 1200 { // more than one insert chunk
			node := "w1"
			if i%2 == 1 {
				node = "w2"
			}
			rows = append(rows, store.HealthSample{Node: node, At: base.Add(time.Duration(i) * time.Second), LatencyMS: int64(i),
				OK: i%10 != 0, Reason: map[bool]string{true: "", false: "connection refused"}[i%10 != 0]})
		}
		if err := store.InsertHealthSamples(ctx, db, rows); err != nil {
			t.Fatal(err)
		}
		got, err := store.NodeHealth(ctx, db, "w1", base.Add(100*time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 || got[0].LatencyMS != 1180 || got[9].LatencyMS != 1198 || got[9].At.Before(got[0].At) {
			t.Fatalf("newest 10 of w1, oldest first: %+v", got)
		}
		all, err := store.NodeHealth(ctx, db, "w2", base, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 600 || all[0].LatencyMS != 1 || !all[0].At.Equal(base.Add(time.Second)) {
			t.Fatalf("w2: %d samples, first %+v", len(all), all[0])
		}
		if got[0].OK || got[0].Reason != "connection refused" || !got[1].OK || got[1].Reason != "" {
			t.Fatalf("outcomes and reasons not kept: %+v", got[:2])
		}
		n, err := store.DeleteHealthBefore(ctx, db, base.Add(1000*time.Second), 300)
		if err != nil || n != 300 {
			t.Fatalf("first prune batch: %d, %v; want 300", n, err)
		}
		n, err = store.DeleteHealthBefore(ctx, db, base.Add(1000*time.Second), 5000)
		if err != nil || n != 700 {
			t.Fatalf("second prune batch: %d, %v; want 700", n, err)
		}
		left, _ := store.NodeHealth(ctx, db, "w1", time.Time{}, 5000)
		if len(left) != 100 || left[0].At.Before(base.Add(1000*time.Second)) {
			t.Fatalf("after pruning: %d samples of w1, first %+v", len(left), left[0])
		}
	})
}

// TestCountNodesByTypeStatus counts per type and status in one query.
func TestCountNodesByTypeStatus(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		for _, name := range []string{"a", "b", "c"} {
			if err := store.CreateNode(ctx, s.Store.DB, newWorkerNode(name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.TransitionNode(ctx, s.Store.DB, "c", store.Transition{From: []store.NodeStatus{store.StatusOffline}, To: store.StatusIdle}); err != nil {
			t.Fatal(err)
		}
		got, err := store.CountNodesByTypeStatus(ctx, s.Store.DB)
		if err != nil {
			t.Fatal(err)
		}
		if got[store.TypeWorker][store.StatusOffline] != 2 || got[store.TypeWorker][store.StatusIdle] != 1 || got[store.TypeMaster] != nil {
			t.Fatalf("counts: %v", got)
		}
	})
}
