package store_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/migrations"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func newWorkerNode(name string) *store.Node {
	return &store.Node{
		Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:30001",
		Priority: 1, MaxConcurrency: 10, Status: store.StatusOffline, Mode: store.ModeManual,
	}
}

func mustGet(t *testing.T, ctx context.Context, s storetest.NamedStore, name string) *store.Node {
	t.Helper()
	n, err := store.GetNode(ctx, s.Store.DB, name)
	if err != nil {
		t.Fatalf("GetNode(%q): %v", name, err)
	}
	return n
}

func insertClaim(t *testing.T, ctx context.Context, s storetest.NamedStore, task, node string, fireAt time.Time) {
	t.Helper()
	_, err := s.Store.DB.ExecContext(ctx, "INSERT INTO locks (task_id, fire_at, node, created_at) VALUES (?, ?, ?, ?)",
		task, fireAt.UTC(), node, time.Now().UTC())
	if err != nil {
		t.Fatalf("insert claim: %v", err)
	}
}

func countClaims(t *testing.T, ctx context.Context, s storetest.NamedStore, node string) int {
	t.Helper()
	var n int
	if err := s.Store.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM locks WHERE node = ?", node).Scan(&n); err != nil {
		t.Fatalf("count claims: %v", err)
	}
	return n
}

func TestParseDSN(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw     string
		dialect store.Dialect
		wantErr bool
	}{
		{"", store.SQLite, false},
		{"sqlite:///tmp/x.db", store.SQLite, false},
		{"/tmp/x.db", store.SQLite, false},
		{"mysql://root@tcp(127.0.0.1:3306)/sm", store.MySQL, false},
		{"mysql://root@tcp(127.0.0.1:3306)/", "", true},
		{"sqlite://", "", true},
		{"postgres://x", "", true},
	}
	for _, c := range cases {
		d, err := store.ParseDSN(c.raw, "/data")
		if (err != nil) != c.wantErr {
			t.Errorf("ParseDSN(%q) error = %v, want error %v", c.raw, err, c.wantErr)
			continue
		}
		if err == nil && d.Dialect != c.dialect {
			t.Errorf("ParseDSN(%q) dialect = %q, want %q", c.raw, d.Dialect, c.dialect)
		}
	}
	d, err := store.ParseDSN("mysql://u:hunter2@tcp(127.0.0.1:3306)/sm", "")
	if err != nil {
		t.Fatal(err)
	}
	if s := d.String(); strings.Contains(s, "hunter2") {
		t.Errorf("DSN.String() leaks the password: %s", s)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		if err := store.CreateNode(ctx, s.Store.DB, newWorkerNode("w1")); err != nil {
			t.Fatal(err)
		}
		// Open the same database again twice: migrations must be a no-op and keep the data.
		for i := 0; i < 2; i++ {
			again, err := store.Open(ctx, s.DSN, storetest.Logger(t))
			if err != nil {
				t.Fatalf("second Open #%d: %v", i+1, err)
			}
			if _, err := store.GetNode(ctx, again.DB, "w1"); err != nil {
				t.Errorf("after reopen #%d: %v", i+1, err)
			}
			var applied int
			if err := again.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM bun_migrations").Scan(&applied); err != nil {
				t.Fatal(err)
			}
			files, err := fs.Glob(migrations.FS, s.Name+"/*.up.sql")
			if err != nil || len(files) == 0 {
				t.Fatalf("no %s migrations found: %v", s.Name, err)
			}
			if applied != len(files) {
				t.Errorf("bun_migrations rows = %d, want %d (one per migration)", applied, len(files))
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestNodeCRUD(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		if _, err := store.GetNode(ctx, db, "w1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetNode of unknown = %v, want ErrNotFound", err)
		}
		n := newWorkerNode("w1")
		if err := store.CreateNode(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		if n.ID == 0 {
			t.Error("CreateNode did not set the id")
		}
		if err := store.CreateNode(ctx, db, newWorkerNode("w2")); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, ctx, s, "w1")
		if got.Host != "127.0.0.1:30001" || got.Protocol != "http" || got.Priority != 1 || got.MaxConcurrency != 10 ||
			got.Status != store.StatusOffline || got.Mode != store.ModeManual || !got.LastSeen.IsZero() {
			t.Errorf("stored node = %+v", got)
		}

		err := store.UpdateNodeConfig(ctx, db, "w1", store.NodeConfig{Protocol: "https", Host: "10.0.0.5:443", Priority: 7, MaxConcurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, ctx, s, "w1")
		if got.Protocol != "https" || got.Host != "10.0.0.5:443" || got.Priority != 7 || got.MaxConcurrency != 3 {
			t.Errorf("after UpdateNodeConfig: %+v", got)
		}
		if err := store.UpdateNodeConfig(ctx, db, "nope", store.NodeConfig{Protocol: "http", Host: "h:1"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("UpdateNodeConfig unknown = %v, want ErrNotFound", err)
		}

		nodes, err := store.ListNodes(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Name != "w1" || nodes[1].Name != "w2" {
			t.Errorf("ListNodes = %v", names(nodes))
		}
		if err := store.TransitionNode(ctx, db, "w2", store.Transition{From: []store.NodeStatus{0}, To: store.StatusIdle}); err != nil {
			t.Fatal(err)
		}
		idle, err := store.ListNodesByStatus(ctx, db, store.StatusIdle, store.StatusRunning)
		if err != nil {
			t.Fatal(err)
		}
		if len(idle) != 1 || idle[0].Name != "w2" {
			t.Errorf("ListNodesByStatus(1,2) = %v", names(idle))
		}

		insertClaim(t, ctx, s, "t1", "w1", time.Now())
		if err := store.DeleteNode(ctx, db, "w1"); err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetNode(ctx, db, "w1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("after delete GetNode = %v, want ErrNotFound", err)
		}
		if c := countClaims(t, ctx, s, "w1"); c != 0 {
			t.Errorf("claims of deleted node = %d, want 0", c)
		}
		if err := store.DeleteNode(ctx, db, "w1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second delete = %v, want ErrNotFound", err)
		}
	})
}

func names(ns []store.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

func TestDuplicateName(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		if err := store.CreateNode(ctx, s.Store.DB, newWorkerNode("dup")); err != nil {
			t.Fatal(err)
		}
		other := newWorkerNode("dup")
		other.Host = "10.0.0.9:1"
		if err := store.CreateNode(ctx, s.Store.DB, other); !errors.Is(err, store.ErrDuplicate) {
			t.Fatalf("second CreateNode = %v, want ErrDuplicate", err)
		}
		if got := mustGet(t, ctx, s, "dup"); got.Host != "127.0.0.1:30001" {
			t.Errorf("duplicate insert changed the row: host %q", got.Host)
		}
		// Names are unique case-insensitively on both dialects, so "DUP"
		// cannot pass for "dup" (lookups stay exact).
		if err := store.CreateNode(ctx, s.Store.DB, newWorkerNode("DUP")); !errors.Is(err, store.ErrDuplicate) {
			t.Errorf("CreateNode(DUP) = %v, want ErrDuplicate (names are unique case-insensitively)", err)
		}
	})
}

func TestTransitionNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		if err := store.CreateNode(ctx, db, newWorkerNode("w1")); err != nil {
			t.Fatal(err)
		}
		secret, boot, desired := "s3cret", "boot-1", store.StatusIdle
		seen := time.Now().UTC().Truncate(time.Millisecond)
		err := store.TransitionNode(ctx, db, "w1", store.Transition{
			From: []store.NodeStatus{store.StatusOffline}, To: store.StatusIdle,
			Secret: &secret, BootID: &boot, DesiredStatus: &desired, Reason: ptr("connected"), Seen: seen,
		})
		if err != nil {
			t.Fatalf("allowed transition: %v", err)
		}
		got := mustGet(t, ctx, s, "w1")
		if got.Status != store.StatusIdle || got.Secret != secret || got.BootID != boot || got.DesiredStatus != desired ||
			got.Reason != "connected" || !got.LastSeen.Equal(seen) || got.Failures != 0 {
			t.Errorf("after transition: %+v (want last_seen %v)", got, seen)
		}

		// Refused: not in From. Nothing may change.
		err = store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusOffline}, To: store.StatusRunning, Secret: ptr("other")})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("refused transition = %v, want ErrConflict", err)
		}
		if errors.Is(err, store.ErrNotFound) {
			t.Error("refused transition of an existing node also matches ErrNotFound")
		}
		if after := mustGet(t, ctx, s, "w1"); after.Status != store.StatusIdle || after.Secret != secret {
			t.Errorf("refused transition changed the row: %+v", after)
		}

		// Unknown node: ErrNotFound, not ErrConflict.
		err = store.TransitionNode(ctx, db, "ghost", store.Transition{From: []store.NodeStatus{0}, To: 1})
		if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			t.Errorf("transition of unknown node = %v, want ErrNotFound only", err)
		}

		// IfBootID guards against a concurrent restart.
		err = store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusIdle}, To: store.StatusRunning, IfBootID: ptr("boot-other")})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("transition with wrong IfBootID = %v, want ErrConflict", err)
		}
		err = store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusIdle}, To: store.StatusRunning, IfBootID: &boot})
		if err != nil {
			t.Fatalf("transition with right IfBootID: %v", err)
		}

		// Going idle releases the node's fire claims, and only its own.
		insertClaim(t, ctx, s, "t1", "w1", time.Now())
		insertClaim(t, ctx, s, "t2", "w2", time.Now())
		if err := store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusRunning}, To: store.StatusIdle}); err != nil {
			t.Fatal(err)
		}
		if c := countClaims(t, ctx, s, "w1"); c != 0 {
			t.Errorf("claims after going idle = %d, want 0", c)
		}
		if c := countClaims(t, ctx, s, "w2"); c != 1 {
			t.Errorf("other node's claims = %d, want 1", c)
		}
	})
}

func TestConcurrentTransitionOneWins(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		if err := store.CreateNode(ctx, s.Store.DB, newWorkerNode("w1")); err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = store.TransitionNode(ctx, s.Store.DB, "w1", store.Transition{From: []store.NodeStatus{store.StatusOffline}, To: store.StatusIdle})
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("loser error = %v, want ErrConflict", err)
			}
		}
		if ok != 1 {
			t.Errorf("%d transitions succeeded, want exactly 1", ok)
		}
	})
}

func TestDeleteNodeRefusesRunning(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		n := newWorkerNode("w1")
		n.Status = store.StatusRunning
		if err := store.CreateNode(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		if err := store.DeleteNode(ctx, db, "w1"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("delete running = %v, want ErrConflict", err)
		}
		if got := mustGet(t, ctx, s, "w1"); got.Status != store.StatusRunning {
			t.Errorf("status after refused delete = %d", got.Status)
		}
		if err := store.DeleteNode(ctx, db, "ghost"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete unknown = %v, want ErrNotFound", err)
		}
		// The master's own node is never deleted by the store either.
		m := &store.Node{Name: "master", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusIdle}
		if err := store.CreateNode(ctx, db, m); err != nil {
			t.Fatal(err)
		}
		if err := store.DeleteNode(ctx, db, "master"); !errors.Is(err, store.ErrConflict) {
			t.Errorf("delete master = %v, want ErrConflict", err)
		}
		if err := store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusRunning}, To: store.StatusIdle}); err != nil {
			t.Fatal(err)
		}
		if err := store.DeleteNode(ctx, db, "w1"); err != nil {
			t.Errorf("delete idle = %v", err)
		}
	})
}

func TestRecordProbeFailure(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		n := newWorkerNode("w1")
		n.Status, n.DesiredStatus = store.StatusRunning, store.StatusRunning
		if err := store.CreateNode(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		insertClaim(t, ctx, s, "task-a", "w1", time.Now())
		insertClaim(t, ctx, s, "task-b", "w1", time.Now().Add(time.Second))
		insertClaim(t, ctx, s, "task-a", "w2", time.Now().Add(2*time.Second))

		for i := 1; i <= 2; i++ {
			off, err := store.RecordProbeFailure(ctx, db, "w1", 3, "connection refused", nil)
			if err != nil || off {
				t.Fatalf("failure %d: off=%v err=%v", i, off, err)
			}
			got := mustGet(t, ctx, s, "w1")
			if got.Failures != i || got.Status != store.StatusRunning {
				t.Fatalf("after failure %d: failures=%d status=%d", i, got.Failures, got.Status)
			}
		}
		if c := countClaims(t, ctx, s, "w1"); c != 2 {
			t.Fatalf("claims before going offline = %d, want 2", c)
		}
		off, err := store.RecordProbeFailure(ctx, db, "w1", 3, "connection refused", nil)
		if err != nil || !off {
			t.Fatalf("third failure: off=%v err=%v, want offline", off, err)
		}
		got := mustGet(t, ctx, s, "w1")
		if got.Status != store.StatusOffline || got.Failures != 0 || !strings.Contains(got.Reason, "connection refused") || !strings.Contains(got.Reason, "3") {
			t.Errorf("after going offline: status=%d failures=%d reason=%q", got.Status, got.Failures, got.Reason)
		}
		if got.DesiredStatus != store.StatusRunning {
			t.Errorf("desired status = %d, want it kept at running for recovery", got.DesiredStatus)
		}
		if c := countClaims(t, ctx, s, "w1"); c != 0 {
			t.Errorf("claims of offline node = %d, want 0", c)
		}
		if c := countClaims(t, ctx, s, "w2"); c != 1 {
			t.Errorf("claims of another node = %d, want 1", c)
		}
		// An offline node counts nothing more.
		off, err = store.RecordProbeFailure(ctx, db, "w1", 3, "still down", nil)
		if err != nil || off {
			t.Errorf("failure on offline node: off=%v err=%v", off, err)
		}
		if got := mustGet(t, ctx, s, "w1"); got.Failures != 0 || got.Reason == "still down" {
			t.Errorf("offline node was counted: %+v", got)
		}
	})
}

func TestMarkSeen(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for _, name := range []string{"a", "b", "off"} {
			n := newWorkerNode(name)
			if name != "off" {
				n.Status = store.StatusRunning
				n.Failures = 2
			}
			if err := store.CreateNode(ctx, db, n); err != nil {
				t.Fatal(err)
			}
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		if err := store.MarkSeen(ctx, db, []string{"a", "off"}, at, nil); err != nil {
			t.Fatal(err)
		}
		if err := store.MarkSeen(ctx, db, nil, at, nil); err != nil {
			t.Fatalf("MarkSeen(nil) = %v", err)
		}
		a, b, off := mustGet(t, ctx, s, "a"), mustGet(t, ctx, s, "b"), mustGet(t, ctx, s, "off")
		if !a.LastSeen.Equal(at) || a.Failures != 0 {
			t.Errorf("a: last_seen=%v failures=%d, want %v and 0", a.LastSeen, a.Failures, at)
		}
		if !b.LastSeen.IsZero() || b.Failures != 2 {
			t.Errorf("b (not named) changed: last_seen=%v failures=%d", b.LastSeen, b.Failures)
		}
		if !off.LastSeen.IsZero() {
			t.Errorf("offline node marked seen: %v", off.LastSeen)
		}
		// More names than one chunk.
		many := make([]string, 1203)
		for i := range many {
			many[i] = "x"
		}
		many[1202] = "b"
		if err := store.MarkSeen(ctx, db, many, at, nil); err != nil {
			t.Fatal(err)
		}
		if b := mustGet(t, ctx, s, "b"); !b.LastSeen.Equal(at) || b.Failures != 0 {
			t.Errorf("b in the last chunk not marked: %+v", b)
		}
	})
}

func TestUpsertRegisteredNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		n := &store.Node{Name: "auto1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:4000",
			Secret: "sec1", BootID: "boot1", Priority: 2, MaxConcurrency: 5, MachineName: "box1"}
		if err := store.UpsertRegisteredNode(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, ctx, s, "auto1")
		if got.Status != store.StatusRunning || got.DesiredStatus != store.StatusRunning || got.Mode != store.ModeAuto ||
			got.Secret != "sec1" || got.BootID != "boot1" || got.LastSeen.IsZero() || got.MachineName != "box1" {
			t.Fatalf("created: %+v", got)
		}
		created := got.CreatedAt

		// The node went offline with failures; it registers again from another address.
		if _, err := db.ExecContext(ctx, "UPDATE nodes SET status = 0, failures = 2, reason = 'x' WHERE name = 'auto1'"); err != nil {
			t.Fatal(err)
		}
		n2 := &store.Node{Name: "auto1", Type: store.TypeWorker, Protocol: "https", Host: "127.0.0.1:4001",
			Secret: "sec2", BootID: "boot2", Priority: 9, MaxConcurrency: 6, MachineName: "box2"}
		if err := store.UpsertRegisteredNode(ctx, db, n2); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, ctx, s, "auto1")
		if got.ID != n.ID || got.Status != store.StatusRunning || got.Secret != "sec2" || got.BootID != "boot2" ||
			got.Host != "127.0.0.1:4001" || got.Protocol != "https" || got.Priority != 9 || got.MaxConcurrency != 6 ||
			got.Failures != 0 || got.Reason != "" || got.MachineName != "box2" {
			t.Errorf("updated: %+v", got)
		}
		if !got.CreatedAt.Equal(created) {
			t.Errorf("created_at changed from %v to %v", created, got.CreatedAt)
		}
		nodes, _ := store.ListNodes(ctx, db)
		if len(nodes) != 1 {
			t.Errorf("%d nodes after re-registration, want 1", len(nodes))
		}

		// A worker cannot take over the master's name.
		m := &store.Node{Name: "master", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", BootID: "mb"}
		if err := store.UpsertRegisteredNode(ctx, db, m); err != nil {
			t.Fatal(err)
		}
		w := &store.Node{Name: "master", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:2", Secret: "evil", BootID: "b"}
		if err := store.UpsertRegisteredNode(ctx, db, w); !errors.Is(err, store.ErrConflict) {
			t.Errorf("worker registering the master's name = %v, want ErrConflict", err)
		}
		if got := mustGet(t, ctx, s, "master"); got.Type != store.TypeMaster || got.Secret == "evil" {
			t.Errorf("master node overwritten: %+v", got)
		}
	})
}

func TestConcurrentUpsertRegisteredNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		const n = 6
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = store.UpsertRegisteredNode(ctx, s.Store.DB, &store.Node{Name: "race", Type: store.TypeWorker,
					Protocol: "http", Host: "127.0.0.1:4000", Secret: "s", BootID: "b", MaxConcurrency: 1})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("registration %d: %v", i, err)
			}
		}
		nodes, err := store.ListNodes(ctx, s.Store.DB)
		if err != nil || len(nodes) != 1 {
			t.Errorf("nodes = %v (%v), want exactly one", names(nodes), err)
		}
	})
}

func TestSettings(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		if _, err := store.GetSetting(ctx, db, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetSetting(missing) = %v, want ErrNotFound", err)
		}
		calls := 0
		gen := func() (string, error) { calls++; return storetest.RandomHex(t, 8), nil }
		v1, err := store.EnsureSetting(ctx, db, "session_key", gen)
		if err != nil || v1 == "" {
			t.Fatalf("EnsureSetting: %q, %v", v1, err)
		}
		v2, err := store.EnsureSetting(ctx, db, "session_key", gen)
		if err != nil || v2 != v1 {
			t.Errorf("EnsureSetting again = %q, %v; want %q", v2, err, v1)
		}
		if calls != 1 {
			t.Errorf("generator called %d times, want 1", calls)
		}
		// A generator error is returned and stores nothing.
		boom := errors.New("boom")
		if _, err := store.EnsureSetting(ctx, db, "other", func() (string, error) { return "", boom }); !errors.Is(err, boom) {
			t.Errorf("EnsureSetting with failing gen = %v", err)
		}
		if _, err := store.GetSetting(ctx, db, "other"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("failed EnsureSetting stored something: %v", err)
		}

		// Concurrent EnsureSetting callers agree on one value.
		const n = 6
		vals := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := store.EnsureSetting(ctx, db, "shared", func() (string, error) { return storetest.RandomHex(t, 8), nil })
				if err != nil {
					t.Errorf("concurrent EnsureSetting: %v", err)
				}
				vals[i] = v
			}()
		}
		wg.Wait()
		for i := 1; i < n; i++ {
			if vals[i] != vals[0] {
				t.Errorf("concurrent EnsureSetting disagree: %q vs %q", vals[i], vals[0])
			}
		}

		// SetSetting inserts, then replaces.
		if err := store.SetSetting(ctx, db, "health_interval", "10s"); err != nil {
			t.Fatal(err)
		}
		if err := store.SetSetting(ctx, db, "health_interval", "5s"); err != nil {
			t.Fatalf("SetSetting upsert: %v", err)
		}
		if v, err := store.GetSetting(ctx, db, "health_interval"); err != nil || v != "5s" {
			t.Errorf("GetSetting after upsert = %q, %v; want 5s", v, err)
		}
		if err := store.SetSetting(ctx, db, "session_key", "replaced"); err != nil {
			t.Fatal(err)
		}
		if v, _ := store.GetSetting(ctx, db, "session_key"); v != "replaced" {
			t.Errorf("SetSetting did not replace an ensured value: %q", v)
		}
		var rows int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM settings WHERE name = 'health_interval'").Scan(&rows); err != nil || rows != 1 {
			t.Errorf("health_interval rows = %d (%v), want 1", rows, err)
		}
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		plain, hash, err := store.NewTokenValue()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(plain, store.TokenPrefix) || hash != store.HashToken(plain) || strings.Contains(hash, plain) {
			t.Fatalf("token %q hash %q", plain, hash)
		}
		plain2, _, _ := store.NewTokenValue()
		if plain2 == plain {
			t.Fatal("two tokens are equal")
		}
		tok := &store.APIToken{Name: "ci", TokenHash: hash, CreatedBy: "admin"}
		if err := store.CreateToken(ctx, db, tok); err != nil {
			t.Fatal(err)
		}
		if tok.ID == 0 {
			t.Error("CreateToken set no id")
		}
		got, err := store.TokenByHash(ctx, db, store.HashToken(plain))
		if err != nil || got.ID != tok.ID || got.Name != "ci" || !got.LastUsedAt.IsZero() {
			t.Fatalf("TokenByHash = %+v, %v", got, err)
		}
		if _, err := store.TokenByHash(ctx, db, store.HashToken(plain2)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown token = %v, want ErrNotFound", err)
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		if err := store.TouchToken(ctx, db, tok.ID, at); err != nil {
			t.Fatal(err)
		}
		if got, _ := store.TokenByHash(ctx, db, hash); got == nil || !got.LastUsedAt.Equal(at) {
			t.Errorf("after touch: %+v, want last_used_at %v", got, at)
		}
		if err := store.CreateToken(ctx, db, &store.APIToken{Name: "dup", TokenHash: hash, CreatedBy: "admin"}); err == nil {
			t.Error("a second token with the same hash was accepted")
		}
		list, err := store.ListTokens(ctx, db)
		if err != nil || len(list) != 1 {
			t.Errorf("ListTokens = %d, %v", len(list), err)
		}
		if err := store.RevokeToken(ctx, db, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := store.TokenByHash(ctx, db, hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoked token still found: %v", err)
		}
		if err := store.RevokeToken(ctx, db, tok.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoking twice = %v, want ErrNotFound", err)
		}
		if err := store.RevokeToken(ctx, db, 999999); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoking unknown = %v, want ErrNotFound", err)
		}
	})
}

func TestUsers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		if n, err := store.CountUsers(ctx, db); err != nil || n != 0 {
			t.Fatalf("CountUsers = %d, %v", n, err)
		}
		u := &store.User{Username: "admin", PasswordHash: "x", Role: store.RoleAdmin}
		if err := store.CreateUser(ctx, db, u); err != nil {
			t.Fatal(err)
		}
		if err := store.CreateUser(ctx, db, &store.User{Username: "admin", PasswordHash: "y", Role: store.RoleViewer}); !errors.Is(err, store.ErrDuplicate) {
			t.Errorf("duplicate user = %v, want ErrDuplicate", err)
		}
		got, err := store.GetUser(ctx, db, "admin")
		if err != nil || got.ID != u.ID || got.PasswordHash != "x" {
			t.Errorf("GetUser = %+v, %v", got, err)
		}
		if _, err := store.GetUserByID(ctx, db, u.ID); err != nil {
			t.Errorf("GetUserByID: %v", err)
		}
		if _, err := store.GetUser(ctx, db, "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetUser unknown = %v", err)
		}
		if n, _ := store.CountUsers(ctx, db); n != 1 {
			t.Errorf("CountUsers = %d, want 1", n)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestListTasksTitleFilterEscapesWildcards(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		for i, title := range []string{"100% done", "100 done", "a_b", "axb"} {
			tk := &store.Task{ID: "t" + string(rune('0'+i)), Title: title, Type: "http", Spec: "{}", Keepers: "[]", Children: "[]"}
			if err := store.CreateTask(ctx, s.Store.DB, tk); err != nil {
				t.Fatal(err)
			}
		}
		for filter, want := range map[string]string{"0%": "100% done", "a_b": "a_b", "A_B": "a_b"} {
			got, total, err := store.ListTasks(ctx, s.Store.DB, store.TaskFilter{Title: filter})
			if err != nil || total != 1 || got[0].Title != want {
				t.Errorf("title filter %q: %d tasks %v %v, want only %q", filter, total, got, err, want)
			}
		}
	})
}
