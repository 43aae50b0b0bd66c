package master_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestPushRacingAStartLosesNoTask: a master that takes the lease re-pushes
// every worker's tasks in the background, read before they are sent; a task
// started meanwhile may be missing from what a worker gets and be dropped
// there. The push is checked once such a start is done, and the task given
// back: every executor ends up scheduling it. Three rounds, each a new
// master and workers, so the race happens in some of them.
func TestPushRacingAStartLosesNoTask(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, storetest.OpenSQLite(t))
			ws := reportingWorkers(e, e.serveMaster(), "w1", "w2", "w3")
			if err := e.m.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			tk, err := e.m.Tasks().Create(e.ctx, httpInput("w1", "w2", "w3"), "admin")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				missing := ""
				for _, n := range []string{"w1", "w2", "w3"} {
					if ws[n].W.Health().RunningTasks != 1 {
						missing += " " + n
					}
				}
				if missing == "" {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the started task is not scheduled on%s", missing)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
