package master_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Two masters, each with its own connection pool on the same database,
// ingest concurrent batches of three workers whose runs all belong to the
// same tasks, and a third of the batches are delivered to both masters at
// once (a worker retrying on another master): every delivery is answered,
// every run is stored and counted once, the counters match the runs, and on
// MariaDB/MySQL no statement met a deadlock (tasks and runs are locked in id
// order; the retry on deadlock is a last resort).
func TestIngestFromSeveralMastersOnSharedTasks(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		dead := &storetest.DeadlockCounter{}
		second, err := store.Open(ctx, s.DSN, storetest.Discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { second.Close() }) // after the masters stop
		var ms []*master.Master
		for i, st := range []*store.Store{s.Store, second} {
			st.DB.AddQueryHook(dead)
			ms = append(ms, newMaster(t, storetest.NamedStore{Name: s.Name, Store: st, DSN: s.DSN}, func(c *master.Config) {
				c.Identity = fmt.Sprintf("m%d", i+1)
			}))
		}
		const nodes, tasks, batches, perBatch = 3, 60, 8, 250
		var nodeRows []*store.Node
		for i := 0; i < nodes; i++ {
			n := &store.Node{Name: fmt.Sprintf("w%d", i), Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
				Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
				Mode: store.ModeAuto, Secret: protocol.NewSecret()}
			if err := store.CreateNode(ctx, s.Store.DB, n); err != nil {
				t.Fatal(err)
			}
			nodeRows = append(nodeRows, n)
		}
		var taskIDs, executors []string
		for _, n := range nodeRows {
			executors = append(executors, n.Name)
		}
		for i := 0; i < tasks; i++ {
			tk := &store.Task{ID: fmt.Sprintf("shared-%02d", i), Title: "shared", Type: "http", Status: store.TaskRunning,
				Spec: "{}", Keepers: "[]", Children: "[]", Executors: executors}
			if err := store.CreateTask(ctx, s.Store.DB, tk); err != nil {
				t.Fatal(err)
			}
			taskIDs = append(taskIDs, tk.ID)
		}
		// The batches, and what the tasks' counters must say afterwards.
		rng := rand.New(rand.NewPCG(1, 2))
		base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
		wantCount := map[string]int64{}
		wantLast := map[string]time.Time{}
		type delivery struct {
			node *store.Node
			runs []protocol.RunReport
		}
		queues := make([][]delivery, len(ms)) // per master
		sent := 0
		for ni, n := range nodeRows {
			for b := 0; b < batches; b++ {
				runs := make([]protocol.RunReport, perBatch)
				for j := range runs {
					task := taskIDs[rng.IntN(tasks)]
					at := base.Add(time.Duration(rng.IntN(3_600_000)) * time.Millisecond)
					runs[j] = protocol.RunReport{ID: fmt.Sprintf("%s-b%d-r%03d", n.Name, b, j), TaskID: task, Node: n.Name,
						ScheduledAt: at, StartedAt: at, EndedAt: at, Result: protocol.ResultSuccess, Attempt: 1}
					wantCount[task]++
					if at.After(wantLast[task]) {
						wantLast[task] = at
					}
				}
				first := (ni + b) % len(ms)
				queues[first] = append(queues[first], delivery{n, runs})
				sent += perBatch
				if b%3 == 0 { // delivered to the other master at the same time
					queues[1-first] = append(queues[1-first], delivery{n, runs})
					sent += perBatch
				}
			}
		}
		var accepted, duplicates atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for mi, m := range ms {
			// Several senders per master, as several workers post at once.
			for g := 0; g < nodes; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := g; k < len(queues[mi]); k += nodes {
						d := queues[mi][k]
						resp, err := m.Runs().Ingest(ctx, d.node, d.runs)
						if err == nil && len(resp.Rejected) > 0 {
							err = fmt.Errorf("rejected: %+v", resp.Rejected[0])
						}
						if err != nil {
							errs <- err
							return
						}
						accepted.Add(int64(resp.Accepted))
						duplicates.Add(int64(resp.Duplicates))
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("ingest: %v", err)
		}
		const distinct = nodes * batches * perBatch
		if accepted.Load() != distinct || accepted.Load()+duplicates.Load() != int64(sent) {
			t.Errorf("accepted %d, duplicates %d; want %d and %d", accepted.Load(), duplicates.Load(), distinct, sent-distinct)
		}
		if n, err := s.Store.DB.NewSelect().Model((*store.Run)(nil)).Count(ctx); err != nil || n != distinct {
			t.Errorf("runs stored %d %v, want %d", n, err, distinct)
		}
		var got []store.Task
		if err := s.Store.DB.NewSelect().Model(&got).Where("id IN (?)", bun.In(taskIDs)).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		for _, tk := range got {
			if tk.RunCount != wantCount[tk.ID] || !tk.LastRunAt.Equal(wantLast[tk.ID]) || tk.LastResult != protocol.ResultSuccess {
				t.Errorf("%s: run_count %d last %s %q; want %d %s", tk.ID, tk.RunCount, tk.LastRunAt, tk.LastResult, wantCount[tk.ID], wantLast[tk.ID])
			}
		}
		if n := dead.N(); n > 0 {
			t.Errorf("%d statements met a deadlock or lock wait timeout", n)
		}
	})
}

// gateHook holds every INSERT into runs while armed, and counts the
// transactions committed and the authorization queries answered.
type gateHook struct {
	armed   atomic.Bool
	gate    chan struct{}
	commits atomic.Int64
	checks  atomic.Int64
}

func (g *gateHook) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if g.armed.Load() && strings.HasPrefix(e.Query, "INSERT INTO") && strings.Contains(e.Query[:30], "runs") {
		<-g.gate
	}
	return ctx
}

func (g *gateHook) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	switch {
	case e.Query == "COMMIT":
		g.commits.Add(1)
	case strings.Contains(e.Query, "AS executes"):
		g.checks.Add(1)
	}
}

// Batches that arrive while a transaction stores runs wait and are stored
// together in the next (group commit): fewer transactions than batches, and
// each batch is answered with its own accepted and duplicate runs, also when
// two of them carry the same runs.
func TestConcurrentBatchesShareTransactions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		hook := &gateHook{gate: make(chan struct{})}
		s.Store.DB.AddQueryHook(hook)
		m := newMaster(t, s)
		node := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
			Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
			Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(ctx, s.Store.DB, node); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := 0; i < 20; i++ {
			tk := &store.Task{ID: fmt.Sprintf("gc-%02d", i), Title: "gc", Type: "http", Status: store.TaskRunning,
				Spec: "{}", Keepers: "[]", Children: "[]", Executors: []string{node.Name}}
			if err := store.CreateTask(ctx, s.Store.DB, tk); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tk.ID)
		}
		now := time.Now().UTC()
		const pairs, per = 4, 100
		batch := func(p int) []protocol.RunReport {
			runs := make([]protocol.RunReport, per)
			for j := range runs {
				runs[j] = protocol.RunReport{ID: fmt.Sprintf("p%d-r%03d", p, j), TaskID: ids[(p+j)%len(ids)], Node: node.Name,
					ScheduledAt: now, StartedAt: now, EndedAt: now, Result: protocol.ResultSuccess, Attempt: 1}
			}
			return runs
		}
		commits0 := hook.commits.Load()
		hook.armed.Store(true)
		type answer struct {
			pair int
			resp protocol.RunsResponse
			err  error
		}
		answers := make(chan answer, 2*pairs)
		for p := 0; p < pairs; p++ {
			for range 2 { // every batch delivered twice at once
				go func() {
					resp, err := m.Runs().Ingest(ctx, node, batch(p))
					answers <- answer{p, resp, err}
				}()
			}
		}
		// Every request has checked its batch and is storing it or waiting.
		storetest.Eventually(t, 30*time.Second, func() bool { return hook.checks.Load() == 2*pairs }, "batches checked")
		hook.armed.Store(false)
		close(hook.gate)
		accepted, dups := map[int]int{}, map[int]int{}
		for range 2 * pairs {
			a := <-answers
			if a.err != nil || len(a.resp.Rejected) > 0 {
				t.Fatalf("pair %d: %+v %v", a.pair, a.resp, a.err)
			}
			accepted[a.pair] += a.resp.Accepted
			dups[a.pair] += a.resp.Duplicates
		}
		for p := 0; p < pairs; p++ {
			if accepted[p] != per || dups[p] != per {
				t.Errorf("pair %d: accepted %d duplicates %d, want %d and %d", p, accepted[p], dups[p], per, per)
			}
		}
		if n, err := s.Store.DB.NewSelect().Model((*store.Run)(nil)).Count(ctx); err != nil || n != pairs*per {
			t.Errorf("runs stored %d %v, want %d", n, err, pairs*per)
		}
		if c := hook.commits.Load() - commits0; c > 2*pairs-3 {
			t.Errorf("%d transactions for %d batches: batches were not stored together", c, 2*pairs)
		}
		t.Logf("%d batches in %d transactions", 2*pairs, hook.commits.Load()-commits0)
	})
}

// A database failure fails every batch of the transaction, so that their
// workers deliver them again, and stores none of their runs; delivered again,
// they are all stored once.
func TestIngestFailureFailsTheBatches(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		m := newMaster(t, s)
		node := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
			Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5,
			Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(ctx, s.Store.DB, node); err != nil {
			t.Fatal(err)
		}
		tk := &store.Task{ID: "fail-1", Title: "f", Type: "http", Status: store.TaskRunning, Spec: "{}", Keepers: "[]",
			Children: "[]", Executors: []string{node.Name}}
		if err := store.CreateTask(ctx, s.Store.DB, tk); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		batches := make([][]protocol.RunReport, 3)
		for b := range batches {
			for j := 0; j < 50; j++ {
				batches[b] = append(batches[b], protocol.RunReport{ID: fmt.Sprintf("b%d-%02d", b, j), TaskID: tk.ID, Node: node.Name,
					ScheduledAt: now, StartedAt: now, EndedAt: now, Result: protocol.ResultSuccess, Attempt: 1})
			}
		}
		deliver := func() []error {
			errs := make([]error, len(batches))
			var wg sync.WaitGroup
			for b := range batches {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := m.Runs().Ingest(ctx, node, batches[b])
					if err == nil && resp.Accepted != 50 {
						err = fmt.Errorf("accepted %d of 50", resp.Accepted)
					}
					errs[b] = err
				}()
			}
			wg.Wait()
			return errs
		}
		// The runs table is gone for a moment: every insert fails.
		if _, err := s.Store.DB.ExecContext(ctx, "ALTER TABLE runs RENAME TO runs_away"); err != nil {
			t.Fatal(err)
		}
		for b, err := range deliver() {
			if err == nil {
				t.Errorf("batch %d accepted while the runs table is missing", b)
			}
		}
		if _, err := s.Store.DB.ExecContext(ctx, "ALTER TABLE runs_away RENAME TO runs"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Store.DB.NewSelect().Model((*store.Run)(nil)).Count(ctx); err != nil || n != 0 {
			t.Fatalf("runs stored by failed batches: %d %v", n, err)
		}
		for b, err := range deliver() {
			if err != nil {
				t.Errorf("batch %d delivered again: %v", b, err)
			}
		}
		got, err := store.GetTask(ctx, s.Store.DB, tk.ID)
		if err != nil || got.RunCount != 150 {
			t.Fatalf("run_count after redelivery: %v %v, want 150", got, err)
		}
	})
}
