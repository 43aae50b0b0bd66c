package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestPoolsPage: the Pools page shows each pool of a key with its members,
// tasks and members' comings and goings; viewers read it without the
// buttons; admins approve and revoke; a pool has its own page.
func TestPoolsPage(t *testing.T) {
	t.Parallel()
	e, admin, viewer := poolsEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	tk := e.createTask("billing job", "a")
	in := master.TaskInput{TaskDef: tk.TaskDef, Selector: "pool=billing"}
	if _, err := e.m.Tasks().Update(ctx, tk.ID, in); err != nil {
		t.Fatal(err)
	}
	// A member whose labels an admin changes is an event of the pool.
	if _, err := e.m.Nodes().SetLabels(ctx, "b", map[string]string{"gpu": "true"}); err != nil {
		t.Fatal(err)
	}

	status, page := e.do(viewer, "GET", "/pools", "", nil)
	for _, want := range []string{`data-pool="pool=billing"`, `data-pool="pool=reports"`, `href="/pools/pool=billing"`,
		`data-node="a"`, `data-node="b"`, `data-task="` + tk.ID + `"`, "billing job", `data-action="node.labels"`, "not approved",
		`<a href="/pools" class="active">Pools</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("viewer's Pools page (%d) lacks %s", status, want)
		}
	}
	if strings.Contains(page, `data-action="approve"`) {
		t.Error("a viewer is offered Approve")
	}
	if resp := e.postForm(viewer, "/pools/approve", url.Values{"pool": {"pool=billing"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer approve: %d, want 403", resp.StatusCode)
	}
	_, page = e.do(admin, "GET", "/pools", "", nil)
	if !strings.Contains(page, `data-action="approve" data-pool="pool=billing"`) {
		t.Fatal("an admin is not offered Approve")
	}
	resp := e.postForm(admin, "/pools/approve", url.Values{"pool": {"pool=billing"}, "from": {"detail"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/pools/pool=billing" {
		t.Fatalf("approve: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, page = e.do(admin, "GET", "/pools/pool=billing", "", nil)
	if status != 200 || !strings.Contains(page, "approved: new workers declaring it join") ||
		!strings.Contains(page, `data-action="revoke" data-pool="pool=billing"`) || !strings.Contains(page, `id="pool-title"`) {
		t.Fatalf("pool page after approve: %d\n%.2000s", status, page)
	}
	resp = e.postForm(admin, "/pools/revoke", url.Values{"pool": {"pool=billing"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/pools?key=pool" {
		t.Fatalf("revoke: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page = e.do(admin, "GET", "/pools", "", nil); !strings.Contains(page, "revoked") {
		t.Error("no flash after revoke")
	}
	// Refusals: a bad pool, revoking what is not approved, a bad key, an unknown pool.
	for _, bad := range []string{"pool=a b", strings.Repeat("k", 100000) + "=v", "pool=a,zone=b", ""} {
		resp := e.postForm(admin, "/pools/approve", url.Values{"pool": {bad}})
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || len(loc) > 100 {
			t.Errorf("approve %.20q: %d to %.100q", bad, resp.StatusCode, loc)
		}
		if _, page = e.do(admin, "GET", "/pools", "", nil); !strings.Contains(page, "flash-error") {
			t.Errorf("no error flash after approving %.20q", bad)
		}
	}
	if pools, _ := e.m.Pools().List(context.Background(), "pool"); len(pools) != 2 {
		t.Errorf("refused approvals made pools: %d", len(pools))
	}
	if status, page = e.do(admin, "GET", "/pools?key=bad+key!", "", nil); status != 400 || !strings.Contains(page, `id="error-key"`) {
		t.Errorf("bad key: %d", status)
	}
	if status, _ = e.do(viewer, "GET", "/pools/pool=nope", "", nil); status != 404 {
		t.Errorf("unknown pool page: %d, want 404", status)
	}
	if status, _ = e.do(viewer, "GET", "/pools/pool=%00", "", nil); status != 400 {
		t.Errorf("NUL in a pool page: %d, want 400", status)
	}
	if _, page = e.do(viewer, "GET", "/pools?key=zone", "", nil); !strings.Contains(page, `data-pool="zone=eu-1"`) || strings.Contains(page, `data-pool="pool=billing"`) {
		t.Error("?key=zone does not group by zone")
	}
}

// TestNodePageLabels: the node page shows each label in force with where it
// comes from; an admin sets admin labels with its form, a bad one is shown
// inline and changes nothing; a viewer has no form.
func TestNodePageLabels(t *testing.T) {
	t.Parallel()
	e, admin, viewer := poolsEnv(t, storetest.OpenSQLite(t))
	resp := e.postForm(admin, "/nodes/a/labels", url.Values{"labels": {"pool=reports, gpu=true"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/nodes/a" {
		t.Fatalf("set labels: %d", resp.StatusCode)
	}
	if got := master.NodeLabels(e.node("a")); got["pool"] != "reports" || got["gpu"] != "true" || got["zone"] != "eu-1" {
		t.Fatalf("labels in force %v", got)
	}
	_, page := e.do(admin, "GET", "/nodes/a", "", nil)
	for _, want := range []string{`data-label="pool" data-from="admin"`, "(worker: pool=billing)", `data-label="zone" data-from="worker"`,
		`data-label="gpu" data-from="admin"`, `value="gpu=true, pool=reports"`, "Admin labels of a set", `href="/pools/pool=reports"`} {
		if !strings.Contains(page, want) {
			t.Errorf("node page lacks %s", want)
		}
	}
	before := e.node("a").AdminLabels
	for typed, says := range map[string]string{"bad key!=x": "bad key!=x", "pool": "must be key=value", "a=1,,b=2": "empty label",
		"pool=\xff": "UTF-8", strings.Repeat("k=v,", 5000): "longer than"} {
		resp := e.postForm(admin, "/nodes/a/labels", url.Values{"labels": {typed}})
		page := body(t, resp)
		if resp.StatusCode/100 != 4 || !strings.Contains(page, says) {
			t.Errorf("labels %.30q: %d, want 4xx saying %q", typed, resp.StatusCode, says)
		}
	}
	if after := e.node("a").AdminLabels; after != before {
		t.Fatalf("refused labels changed the node: %s -> %s", before, after)
	}
	resp = e.postForm(admin, "/nodes/master/labels", url.Values{"labels": {"pool=x"}})
	if page := body(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(page, "only workers") {
		t.Errorf("labels on the master: %d", resp.StatusCode)
	}
	if resp := e.postForm(viewer, "/nodes/a/labels", url.Values{"labels": {"pool=x"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("viewer: %d, want 403", resp.StatusCode)
	}
	if _, page := e.do(viewer, "GET", "/nodes/a", "", nil); strings.Contains(page, `id="node-labels-form"`) || !strings.Contains(page, `data-label="gpu"`) {
		t.Error("a viewer sees the labels form, or not the labels")
	}
	// Empty removes them.
	e.postForm(admin, "/nodes/a/labels", url.Values{"labels": {""}})
	if got := master.AdminLabels(e.node("a")); len(got) != 0 {
		t.Fatalf("admin labels after an empty form: %v", got)
	}
}

// TestTaskFormSelector: the task form saves a selector and shows a bad one
// inline; the preview says what it matches; the task page lists the members.
func TestTaskFormSelector(t *testing.T) {
	t.Parallel()
	e, admin, viewer := poolsEnv(t, storetest.OpenSQLite(t))
	resp := e.postForm(admin, "/tasks", with(taskForm("pooled", "http://127.0.0.1:1/x"), "selector", "pool = billing"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d\n%.3000s", resp.StatusCode, body(t, resp))
	}
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	tk := e.task(id)
	if tk.Selector != "pool=billing" || len(tk.Executors) != 0 || strings.Join(tk.Selected, ",") != "a,b" {
		t.Fatalf("stored %q executors %v selected %v", tk.Selector, tk.Executors, tk.Selected)
	}
	_, page := e.do(viewer, "GET", "/tasks/"+id, "", nil)
	for _, want := range []string{`id="task-selector">pool=billing`, `data-node="a"`, `badge-running`, `data-node="b"`, `badge-offline`} {
		if !strings.Contains(page, want) {
			t.Errorf("task page lacks %s", want)
		}
	}
	if _, page = e.do(admin, "GET", "/tasks/"+id+"/edit", "", nil); !strings.Contains(page, `id="selector" name="selector" value="pool=billing"`) {
		t.Error("the edit form does not show the selector")
	}
	if _, page = e.do(admin, "GET", "/tasks?title=pooled", "", nil); !strings.Contains(page, "selector pool=billing") {
		t.Error("the task list does not show the selector")
	}
	n := len(e.tasks())
	resp = e.postForm(admin, "/tasks", with(taskForm("bad", "http://127.0.0.1:1/x"), "selector", "pool in billing"))
	if page := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="error-selector"`) ||
		!strings.Contains(page, "at character 9") || !strings.Contains(page, `value="pool in billing"`) {
		t.Errorf("bad selector: %d", resp.StatusCode)
	}
	if len(e.tasks()) != n {
		t.Fatal("a task with a bad selector was stored")
	}

	for q, want := range map[string]string{
		"pool=billing":            "matches 1 running node: a",
		"pool":                    "matches 2 running nodes: a, c",
		"pool=nope":               "matches 0 running nodes",
		"":                        `id="selector-blank"`,
		"pool in billing":         "at character 9",
		strings.Repeat("a", 2000): "longer than",
	} {
		if status, frag := e.do(viewer, "GET", "/selectors/preview?selector="+url.QueryEscape(q), "", hx); status != 200 || !strings.Contains(frag, want) {
			t.Errorf("preview %.30q: %d %.300s, want %q", q, status, frag, want)
		}
	}
	if status, _ := e.do(viewer, "GET", "/selectors/preview?selector=pool%3D%00", "", hx); status != 400 {
		t.Errorf("preview of a NUL: %d, want 400", status)
	}
	if _, frag := e.do(viewer, "GET", "/selectors/preview?selector=pool%3Dbilling", "", hx); !strings.Contains(frag, "and 1 node not running now: b") {
		t.Errorf("preview does not name the offline member: %.300s", frag)
	}
}

// TestSettingsPruneOfflineAfter: the Settings page shows and saves
// prune_offline_after; values out of range are refused inline.
func TestSettingsPruneOfflineAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	if _, page := e.do(admin, "GET", "/settings", "", nil); !strings.Contains(page, `name="prune_offline_after" value="24h"`) {
		t.Fatal("the settings page does not show prune_offline_after (24h by default)")
	}
	resp := e.postForm(admin, "/settings", settingsWith(settingsGood(), "prune_offline_after", "7d"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save 7d: %d", resp.StatusCode)
	}
	if cur, _ := e.m.Settings(); cur.PruneOfflineAfter != 7*24*time.Hour {
		t.Fatalf("prune_offline_after in force %s, want 168h", cur.PruneOfflineAfter)
	}
	if _, page := e.do(admin, "GET", "/settings", "", nil); !strings.Contains(page, `name="prune_offline_after" value="7d"`) {
		t.Fatal("the saved value is not shown")
	}
	for _, v := range []string{"30m", "366d", "abc", "", "-1h", "1.5d"} {
		resp := e.postForm(admin, "/settings", settingsWith(settingsGood(), "prune_offline_after", v))
		if page := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="error-prune_offline_after"`) {
			t.Errorf("prune_offline_after %q: %d", v, resp.StatusCode)
		}
	}
	if cur, _ := e.m.Settings(); cur.PruneOfflineAfter != 7*24*time.Hour {
		t.Fatalf("refusals changed the setting to %s", cur.PruneOfflineAfter)
	}
	if resp := e.postForm(admin, "/settings", settingsWith(settingsGood(), "prune_offline_after", "0")); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save 0: %d", resp.StatusCode)
	}
	if cur, _ := e.m.Settings(); cur.PruneOfflineAfter != 0 {
		t.Fatalf("0 saved as %s", cur.PruneOfflineAfter)
	}
}

// TestDelayedFormSelector: the delayed task form takes a selector.
func TestDelayedFormSelector(t *testing.T) {
	t.Parallel()
	e, admin, _ := poolsEnv(t, storetest.OpenSQLite(t))
	if _, page := e.do(admin, "GET", "/delayed/new", "", nil); !strings.Contains(page, `id="selector"`) {
		t.Fatal("no selector field on the delayed form")
	}
	v := url.Values{"source_app": {"shop"}, "topic": {"t"}, "content_key": {"k"}, "delay": {"1h"},
		"notify_url": {"http://127.0.0.1:1/cb"}, "content_type": {"application/json"}, "retries": {"0"}, "selector": {"pool in billing"}}
	resp := e.postForm(admin, "/delayed", v)
	if page := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="error-selector"`) {
		t.Fatalf("bad selector: %d", resp.StatusCode)
	}
	v.Set("selector", "pool=billing")
	resp = e.postForm(admin, "/delayed", v)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d %.2000s", resp.StatusCode, body(t, resp))
	}
	if _, page := e.do(admin, "GET", resp.Header.Get("Location"), "", nil); !strings.Contains(page, `id="delayed-selector">pool=billing`) {
		t.Fatal("the delayed task's page does not show its selector")
	}
}
