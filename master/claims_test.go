package master_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// runningTask stores running worker nodes with the given priorities and a
// running task that they all execute.
func runningTask(t *testing.T, e *env, prios map[string]int) string {
	t.Helper()
	var names []string
	for name, p := range prios {
		n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
			DesiredStatus: store.StatusRunning, Priority: p, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	tk := &store.Task{ID: "t-claims", Title: "claims", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t-claims","title":"claims","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: names}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

func TestClaimOneWinnerPerFireSpreadByWeight(t *testing.T) {
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		r := rand.New(rand.NewPCG(7, 11))
		var rmu sync.Mutex
		e := newEnv(t, s, func(c *master.Config) {
			c.RandN = func(n int64) int64 { rmu.Lock(); defer rmu.Unlock(); return r.Int64N(n) }
			c.ClaimWait = 2 * time.Second
		})
		prios := map[string]int{"a": 1, "b": 1, "c": 2}
		id := runningTask(t, e, prios)
		const fires = 300
		base := time.Now().Truncate(time.Second)
		wins := map[string]int{}
		for f := 0; f < fires; f++ {
			fire := base.Add(time.Duration(f) * time.Second)
			var wg sync.WaitGroup
			var mu sync.Mutex
			winners := 0
			for name := range prios {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := e.m.Claim(e.ctx, e.node(name), protocol.ClaimRequest{TaskID: id, FireAt: fire})
					if err != nil {
						t.Errorf("claim %s: %v", name, err)
						return
					}
					if resp.Won {
						mu.Lock()
						winners++
						wins[name]++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if winners != 1 {
				t.Fatalf("fire %d: %d winners, want exactly 1", f, winners)
			}
		}
		for name, want := range map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5} {
			share := float64(wins[name]) / fires
			if share < want-0.08 || share > want+0.08 {
				t.Errorf("%s won %.2f of fires, want %.2f±0.08", name, share, want)
			}
		}
		// A late claim of a decided fire loses; the recorded winner stands.
		resp, err := e.m.Claim(e.ctx, e.node("a"), protocol.ClaimRequest{TaskID: id, FireAt: base})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Winner == "" || (resp.Won != (resp.Winner == "a")) {
			t.Fatalf("late claim: %+v", resp)
		}
	})
}

func TestClaimMissingExecutorDoesNotHoldTheFire(t *testing.T) {
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.ClaimWait = 200 * time.Millisecond })
		id := runningTask(t, e, map[string]int{"x": 1, "y": 1})
		// Only x claims (y is dead but not yet detected): x wins after ClaimWait.
		start := time.Now()
		resp, err := e.m.Claim(e.ctx, e.node("x"), protocol.ClaimRequest{TaskID: id, FireAt: time.Now().Truncate(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Won || resp.Winner != "x" {
			t.Fatalf("lone claimant: %+v, want it to win", resp)
		}
		if took := time.Since(start); took < 150*time.Millisecond {
			t.Fatalf("decided after %s: it must wait for the other executor first", took)
		}
		// A node that is not an executor never wins.
		other := &store.Node{Name: "z", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning, Priority: 9, MaxConcurrency: 1, Mode: store.ModeAuto}
		if err := store.CreateNode(e.ctx, s.Store.DB, other); err != nil {
			t.Fatal(err)
		}
		resp, err = e.m.Claim(e.ctx, e.node("z"), protocol.ClaimRequest{TaskID: id, FireAt: time.Now().Add(time.Hour).Truncate(time.Second)})
		if !errors.Is(err, master.ErrForbidden) || resp.Won {
			t.Fatalf("non-executor claim: %+v %v, want ErrForbidden", resp, err)
		}
	})
}
