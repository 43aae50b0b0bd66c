package master_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestTaskVersionEverySaveIsKept: a creation is version 1, each edit the
// next, with who, from where and a note; one version's answer masks its
// secrets; an edit from an older version is refused naming who saved the
// newer one; a restore is a new version with the old definition; only the
// last MaxTaskVersions are kept.
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
	vs, err := e.m.Tasks().Versions(e.ctx, tk.ID)
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
	vs, _ = e.m.Tasks().Versions(e.ctx, tk.ID)
	if vs[0].Version != 3 || vs[0].Via != master.ViaRestore || vs[0].Note != "restored version 1" {
		t.Fatalf("the restore's version: %+v", vs[0])
	}

	// Only the last MaxTaskVersions are kept.
	in.Note = ""
	for i := range master.MaxTaskVersions + 2 {
		in.HTTP.URL = "http://127.0.0.1:1/e" + strings.Repeat("x", i%3)
		in.Title = "ping " + string(rune('a'+i%26))
		if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	vs, _ = e.m.Tasks().Versions(e.ctx, tk.ID)
	if len(vs) != master.MaxTaskVersions || vs[0].Version != master.MaxTaskVersions+5 {
		t.Fatalf("%d versions kept, newest %d; want %d, newest %d", len(vs), vs[0].Version, master.MaxTaskVersions, master.MaxTaskVersions+5)
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
	vs, err := e.m.Tasks().Versions(e.ctx, tk.ID)
	if err != nil || len(vs) != 2 || vs[1].Via != master.ViaBefore || vs[1].Title != "ping" || vs[0].Title != "renamed" {
		t.Fatalf("versions: %v %+v", err, vs)
	}
}
