package master_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestTaskVersionEverySaveIsKept: a creation is version 1, each edit the
// next, with who, from where and a note; one version's answer masks its
// secrets; an edit from an older version is refused naming who saved the
// newer one; a restore is a new version with the old definition; only the
// last task_versions_kept are kept (a setting), and those a recent run ran;
// the list pages by ?before=.
func TestTaskVersionEverySaveIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "a")
	const secret = "version-secret-0001"
	in := httpInput("a")
	in.HTTP.URL = "http://127.0.0.1:1/v1"
	in.Params, in.SecretParams = map[string]string{"token": secret}, []string{"token"}
	in.Note = "first"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if tk.Version != 1 {
		t.Fatalf("a new task is version %d, want 1", tk.Version)
	}
	in.HTTP.URL, in.Note, in.Version = "http://127.0.0.1:1/v2", "point at v2", 1
	got, err := e.m.Tasks().Update(e.ctx, tk.ID, in)
	if err != nil || got.Version != 2 {
		t.Fatalf("edit: %v, version %d", err, got.Version)
	}
	vs, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0)
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || !vs[0].Current || vs[1].Current || vs[0].Note != "point at v2" ||
		vs[1].Note != "first" || vs[0].Via != master.ViaConsole || vs[0].CreatedBy == "" || vs[0].Definition != nil {
		t.Fatalf("versions: %v %+v", err, vs)
	}
	v1, err := e.m.Tasks().Version(e.ctx, tk.ID, 1)
	if err != nil || v1.Definition == nil || v1.Definition.HTTP.URL != "http://127.0.0.1:1/v1" {
		t.Fatalf("version 1: %v %+v", err, v1)
	}
	if js, _ := json.Marshal(v1); strings.Contains(string(js), secret) {
		t.Fatalf("a version's answer shows a secret: %s", js)
	}
	if _, err := e.m.Tasks().Version(e.ctx, tk.ID, 9); master.KindOf(err) != master.KindNotFound {
		t.Fatalf("a version that does not exist: %v", err)
	}

	// An edit that started from version 1 is refused: version 2 came first.
	in.HTTP.URL, in.Version = "http://127.0.0.1:1/stale", 1
	_, err = e.m.Tasks().Update(e.ctx, tk.ID, in)
	if master.KindOf(err) != master.KindState || !strings.Contains(err.Error(), "changed since version 1") ||
		!strings.Contains(err.Error(), "saved version 2") {
		t.Fatalf("a stale edit: %v", err)
	}
	if cur, _ := e.m.Tasks().Get(e.ctx, tk.ID); cur.Version != 2 || cur.HTTP.URL != "http://127.0.0.1:1/v2" {
		t.Fatalf("a refused stale edit changed the task: %d %s", cur.Version, cur.HTTP.URL)
	}
	in.Note = strings.Repeat("n", 1001)
	in.Version = 0
	if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); !isFieldErrors(err, "note") {
		t.Fatalf("a note too long: %v", err)
	}

	// Restore version 1: version 3, its definition, secret and all.
	got, err = e.m.Tasks().Restore(e.ctx, tk.ID, 1, "")
	if err != nil || got.Version != 3 || got.HTTP.URL != "http://127.0.0.1:1/v1" || got.Params["token"] != secret {
		t.Fatalf("restore: %v %+v", err, got)
	}
	vs, _, _ = e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0)
	if vs[0].Version != 3 || vs[0].Via != master.ViaRestore || vs[0].Note != "restored version 1" {
		t.Fatalf("the restore's version: %+v", vs[0])
	}

	// Only the last task_versions_kept are kept, and those a recent run ran:
	// a run of version 2 keeps it.
	if err := e.m.ChangeSettings(e.ctx, func(s *master.Settings) { s.TaskVersionsKept = master.MinTaskVersionsKept }); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	if _, err := store.InsertRuns(e.ctx, e.s.Store.DB, []store.Run{{ID: "ran-v2", TaskID: tk.ID, Node: "a", ScheduledAt: at,
		StartedAt: at, EndedAt: at, Result: store.ResultSuccess, Attempt: 1, TaskVersion: 2}}); err != nil {
		t.Fatal(err)
	}
	in.Note = ""
	const edits = master.MinTaskVersionsKept + 5
	for i := range edits {
		in.HTTP.URL = "http://127.0.0.1:1/e" + strings.Repeat("x", i%3)
		in.Title = "ping " + string(rune('a'+i%26))
		if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	vs, more, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0)
	newest := 3 + edits
	if err != nil || more || len(vs) != master.MinTaskVersionsKept+1 || vs[0].Version != newest || vs[len(vs)-1].Version != 2 {
		t.Fatalf("versions kept (%v, more %v): %+v; want %d..%d and 2, which a run ran", err, more, vs, newest-master.MinTaskVersionsKept+1, newest)
	}
	if _, err := e.m.Tasks().Version(e.ctx, tk.ID, 3); master.KindOf(err) != master.KindNotFound {
		t.Fatalf("version 3, past the setting and run by none: %v, want not found", err)
	}
	// Pages: the newest 4, then the next 4 from before the last one.
	page, more, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 4)
	if err != nil || !more || len(page) != 4 || page[0].Version != newest {
		t.Fatalf("first page: %v %v %+v", err, more, page)
	}
	page2, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, page[3].Version, 4)
	if err != nil || len(page2) != 4 || page2[0].Version != page[3].Version-1 {
		t.Fatalf("second page: %v %+v", err, page2)
	}
	for _, bad := range [][2]int{{-1, 0}, {0, -1}, {0, master.MaxVersionsPage + 1}} {
		if _, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, bad[0], bad[1]); master.KindOf(err) != master.KindInvalid {
			t.Fatalf("before %d, limit %d: %v, want invalid", bad[0], bad[1], err)
		}
	}
}

// TestTaskVersionOfATaskFromBeforeVersions: a task saved before versions
// were kept has none; its first edit records the definition it had (version
// 1, "before versions") and the edit as version 2.
func TestTaskVersionOfATaskFromBeforeVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "a")
	tk, err := e.m.Tasks().Create(e.ctx, httpInput("a"), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteTaskVersion(e.ctx, e.s.Store.DB, tk.ID, 1); err != nil {
		t.Fatal(err)
	}
	in := httpInput("a")
	in.Title = "renamed"
	if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
		t.Fatal(err)
	}
	vs, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0)
	if err != nil || len(vs) != 2 || vs[1].Via != master.ViaBefore || vs[1].Title != "ping" || vs[0].Title != "renamed" {
		t.Fatalf("versions: %v %+v", err, vs)
	}
}

// TestTaskVersionConcurrentEditsOneWins: eight edits that all started from
// version 1 race: one is saved as version 2, the seven others are refused
// naming the version that came first, and none is lost half-way.
func TestTaskVersionConcurrentEditsOneWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "a")
	in := httpInput("a")
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			edit := in
			edit.HTTP = &protocol.HTTPSpec{Method: "GET", URL: fmt.Sprintf("http://127.0.0.1:1/edit-%d", i)}
			edit.Version = 1
			_, errs[i] = e.m.Tasks().Update(e.ctx, tk.ID, edit)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("edits %d and %d were both saved over version 1", won, i)
		case master.KindOf(err) != master.KindState || !strings.Contains(err.Error(), "changed since version 1"):
			t.Fatalf("edit %d: %v, want a conflict naming version 1", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no edit was saved")
	}
	cur, err := e.m.Tasks().Get(e.ctx, tk.ID)
	if err != nil || cur.Version != 2 || cur.HTTP.URL != fmt.Sprintf("http://127.0.0.1:1/edit-%d", won) {
		t.Fatalf("the task after the race: %v v%d %s, want edit %d as version 2", err, cur.Version, cur.HTTP.URL, won)
	}
	if vs, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0); err != nil || len(vs) != 2 {
		t.Fatalf("versions after the race: %v %+v", err, vs)
	}
}
