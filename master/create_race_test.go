package master_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestConcurrentTaskCreationNeverDeadlocks: many tasks created at once, on
// the same executors, all succeed. On MariaDB, clearing the executors of a
// task being created took gap locks that deadlocked concurrent creations
// (Error 1213 in "set executors").
func TestConcurrentTaskCreationNeverDeadlocks(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		runningWorkers(e, "w1", "w2")
		const creators, each = 16, 25
		var wg sync.WaitGroup
		errs := make(chan error, creators*each)
		for c := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					in := httpInput("w1", "w2")
					in.Title = fmt.Sprintf("race-%d-%d", c, i)
					if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		var failed []error
		for err := range errs {
			failed = append(failed, err)
		}
		if len(failed) > 0 {
			t.Fatalf("%d of %d concurrent creations failed, the first: %v", len(failed), creators*each, failed[0])
		}
		tasks, total, err := e.m.Tasks().List(e.ctx, store.TaskFilter{})
		if err != nil || total != creators*each {
			t.Fatalf("%d tasks stored (%d listed, %v), want %d", total, len(tasks), err, creators*each)
		}
	})
}
