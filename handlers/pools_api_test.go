package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// labelledNode stores a worker node that declares labels (a JSON object).
func (e *env) labelledNode(name, labels string, status store.NodeStatus) {
	e.t.Helper()
	n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: status,
		DesiredStatus: status, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret(), Labels: labels}
	if err := store.CreateNode(context.Background(), e.st.DB, n); err != nil {
		e.t.Fatal(err)
	}
}

// poolsEnv is an env with an admin and a viewer session, and three workers:
// a and b in pool=billing (b offline, a in zone eu-1), c in pool=reports.
func poolsEnv(t *testing.T, ns storetest.NamedStore) (e *env, admin, viewer *http.Client) {
	e = newEnv(t, ns)
	e.addUser("viewer", "viewer-password", store.RoleViewer)
	e.labelledNode("a", `{"pool":"billing","zone":"eu-1"}`, store.StatusRunning)
	e.labelledNode("b", `{"pool":"billing"}`, store.StatusOffline)
	e.labelledNode("c", `{"pool":"reports"}`, store.StatusRunning)
	m := &store.Node{Name: "master", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
		DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
	if err := store.CreateNode(context.Background(), e.st.DB, m); err != nil {
		t.Fatal(err)
	}
	return e, e.login("admin", "admin-password-1"), e.login("viewer", "viewer-password")
}

type apiLabelledNode struct {
	Name           string            `json:"name"`
	Labels         map[string]string `json:"labels"`
	DeclaredLabels map[string]string `json:"declared_labels"`
	AdminLabels    map[string]string `json:"admin_labels"`
}

// TestAPINodeLabels: node JSON carries the labels in force and both sides;
// PUT .../labels sets the admin's, which win; refusals change nothing.
func TestAPINodeLabels(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e, admin, viewer := poolsEnv(t, ns)
		status, body := e.do(viewer, "GET", "/api/v1/nodes/a", "", nil)
		n := decode[apiLabelledNode](t, body)
		if status != 200 || n.Labels["pool"] != "billing" || n.DeclaredLabels["zone"] != "eu-1" || n.AdminLabels == nil || len(n.AdminLabels) != 0 {
			t.Fatalf("GET a: %d %s", status, body)
		}
		status, body = e.do(admin, "GET", "/api/v1/nodes/master", "", nil)
		if m := decode[apiLabelledNode](t, body); status != 200 || m.Labels == nil || len(m.Labels) != 0 {
			t.Fatalf("GET master: %d %s, want empty label objects", status, body)
		}

		status, body = e.do(admin, "PUT", "/api/v1/nodes/a/labels", `{"labels":{"pool":"reports","gpu":"true"}}`, nil)
		n = decode[apiLabelledNode](t, body)
		if status != 200 || n.Labels["pool"] != "reports" || n.Labels["zone"] != "eu-1" || n.Labels["gpu"] != "true" ||
			n.DeclaredLabels["pool"] != "billing" || n.AdminLabels["pool"] != "reports" {
			t.Fatalf("PUT labels: %d %s, want the admin's pool over the worker's", status, body)
		}
		if got := master.NodeLabels(e.node("a"))["pool"]; got != "reports" {
			t.Fatalf("stored labels in force: pool=%q", got)
		}

		before := e.node("a").AdminLabels
		for _, c := range []struct {
			name   string
			client *http.Client
			body   string
			status int
			says   string
		}{
			{"viewer", viewer, `{"labels":{"pool":"x"}}`, 403, ""},
			{"bad key", admin, `{"labels":{"bad key!":"x"}}`, 400, `bad key!=x`},
			{"bad value", admin, `{"labels":{"pool":"-x"}}`, 400, "value must be"},
			{"no labels", admin, `{}`, 400, "labels"},
			{"not strings", admin, `{"labels":{"pool":1}}`, 400, "invalid JSON"},
			{"unknown field", admin, `{"labels":{},"x":1}`, 400, "invalid JSON"},
			{"NUL", admin, `{"labels":{"pool":"a\u0000b"}}`, 400, "NUL"},
			{"invalid UTF-8", admin, "{\"labels\":{\"pool\":\"a\xffb\"}}", 400, "UTF-8"},
			{"too many", admin, `{"labels":{` + manyLabels(protocol.MaxLabels+1) + `}}`, 400, "more than"},
			{"huge", admin, `{"labels":{"pool":"` + strings.Repeat("x", 300<<10) + `"}}`, 413, ""},
		} {
			status, body := e.do(c.client, "PUT", "/api/v1/nodes/a/labels", c.body, nil)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Errorf("%s: %d %.200s, want %d saying %q", c.name, status, body, c.status, c.says)
			}
		}
		if after := e.node("a").AdminLabels; after != before {
			t.Fatalf("admin labels changed by refusals: %s -> %s", before, after)
		}
		if status, body := e.do(admin, "PUT", "/api/v1/nodes/nope/labels", `{"labels":{}}`, nil); status != 404 {
			t.Errorf("unknown node: %d %s", status, body)
		}
		if status, body := e.do(admin, "PUT", "/api/v1/nodes/master/labels", `{"labels":{"pool":"x"}}`, nil); status != 409 || !strings.Contains(body, "only workers") {
			t.Errorf("master: %d %s, want 409", status, body)
		}
		// {} removes the admin labels: the worker's come back.
		status, body = e.do(admin, "PUT", "/api/v1/nodes/a/labels", `{"labels":{}}`, nil)
		if n := decode[apiLabelledNode](t, body); status != 200 || n.Labels["pool"] != "billing" || len(n.AdminLabels) != 0 {
			t.Fatalf("PUT {}: %d %s", status, body)
		}

		// Create and patch take labels; a bad label creates nothing.
		status, body = e.do(admin, "POST", "/api/v1/nodes", `{"name":"m1","host":"127.0.0.1:9","labels":{"pool":"billing"}}`, nil)
		if n := decode[apiLabelledNode](t, body); status != 201 || n.Labels["pool"] != "billing" || n.AdminLabels["pool"] != "billing" {
			t.Fatalf("create with labels: %d %s", status, body)
		}
		count := e.nodeCount()
		status, body = e.do(admin, "POST", "/api/v1/nodes", `{"name":"m2","host":"127.0.0.1:9","labels":{"pool":"bad value!"}}`, nil)
		if status != 400 || !strings.Contains(body, "labels") || e.nodeCount() != count {
			t.Fatalf("create with a bad label: %d %s, %d nodes (was %d)", status, body, e.nodeCount(), count)
		}
		status, body = e.do(admin, "PATCH", "/api/v1/nodes/m1", `{"labels":{"pool":"reports"}}`, nil)
		if n := decode[apiLabelledNode](t, body); status != 200 || n.Labels["pool"] != "reports" {
			t.Fatalf("patch labels: %d %s", status, body)
		}
		status, body = e.do(admin, "PATCH", "/api/v1/nodes/m1", `{"priority":3,"labels":{"pool":"x y"}}`, nil)
		if status != 400 || e.node("m1").Priority == 3 {
			t.Fatalf("patch with a bad label: %d %s, priority %d (must not change)", status, body, e.node("m1").Priority)
		}
	})
}

func manyLabels(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return strings.Join(parts, ",")
}

// TestAPINodesSelector: ?selector= keeps the nodes it selects; a bad one is
// a 400 pointing at the character.
func TestAPINodesSelector(t *testing.T) {
	t.Parallel()
	e, _, viewer := poolsEnv(t, storetest.OpenSQLite(t))
	names := func(q string) ([]string, int, string) {
		status, body := e.do(viewer, "GET", "/api/v1/nodes?selector="+url.QueryEscape(q), "", nil)
		if status != 200 {
			return nil, status, body
		}
		var out []string
		for _, n := range decode[[]apiLabelledNode](t, body) {
			out = append(out, n.Name)
		}
		return out, status, body
	}
	for q, want := range map[string][]string{
		"pool=billing":                          {"a", "b"},
		"pool in (billing, reports),zone!=eu-1": {"b", "c"},
		"zone":                                  {"a"},
		"":                                      {"master", "a", "b", "c"},
	} {
		if got, status, body := names(q); !slices.Equal(got, want) {
			t.Errorf("selector %q: %v (%d %.200s), want %v", q, got, status, body, want)
		}
	}
	for q, says := range map[string]string{"pool in billing": "at character 9", "pool=\x00": "NUL",
		"pool=\xff": "UTF-8", strings.Repeat("a", 5000): "longer than"} {
		if _, status, body := names(q); status != 400 || !strings.Contains(body, says) {
			t.Errorf("selector %.40q: %d %.200s, want 400 saying %q", q, status, body, says)
		}
	}
}

type apiPool struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Label    string `json:"label"`
	Approved bool   `json:"approved"`
	Running  int    `json:"running"`
	Members  []struct {
		Name       string `json:"name"`
		StatusName string `json:"status_name"`
	} `json:"members"`
	Tasks []struct {
		ID       string `json:"id"`
		Title    string `json:"title"`
		Selector string `json:"selector"`
	} `json:"tasks"`
}

// TestAPIPools: the pools of a key, one pool, approval and its withdrawal,
// refusals.
func TestAPIPools(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e, admin, viewer := poolsEnv(t, ns)
		status, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"bill","type":"http","schedule":{"kind":"cron","cron":"0 3 * * *"},
			"http":{"method":"GET","url":"http://127.0.0.1:1/x"},"selector":"pool = billing"}`, nil)
		if status != 201 {
			t.Fatalf("create task: %d %s", status, body)
		}
		tk := decode[master.Task](t, body)

		status, body = e.do(viewer, "GET", "/api/v1/pools", "", nil)
		list := decode[struct {
			Key   string    `json:"key"`
			Pools []apiPool `json:"pools"`
		}](t, body)
		if status != 200 || list.Key != "pool" || len(list.Pools) != 2 || list.Pools[0].Label != "pool=billing" ||
			len(list.Pools[0].Members) != 2 || list.Pools[0].Running != 1 || len(list.Pools[0].Tasks) != 1 ||
			list.Pools[0].Tasks[0].ID != tk.ID || list.Pools[1].Label != "pool=reports" || len(list.Pools[1].Tasks) != 0 {
			t.Fatalf("GET pools: %d %s", status, body)
		}
		status, body = e.do(viewer, "GET", "/api/v1/pools?key=zone", "", nil)
		if zones := decode[struct {
			Pools []apiPool `json:"pools"`
		}](t, body); status != 200 || len(zones.Pools) != 1 || zones.Pools[0].Label != "zone=eu-1" {
			t.Fatalf("GET pools by zone: %d %s", status, body)
		}
		status, body = e.do(viewer, "GET", "/api/v1/pools/pool=billing", "", nil)
		if p := decode[apiPool](t, body); status != 200 || p.Key != "pool" || p.Value != "billing" || len(p.Members) != 2 ||
			p.Members[1].StatusName != "offline" || len(p.Tasks) != 1 || p.Tasks[0].Title != "bill" || p.Approved {
			t.Fatalf("GET pool=billing: %d %s", status, body)
		}

		// Refusals and hostile input.
		for _, c := range []struct {
			client       *http.Client
			method, path string
			status       int
			says         string
		}{
			{viewer, "GET", "/api/v1/pools/pool=nope", 404, "pool=nope"},
			{viewer, "GET", "/api/v1/pools/nonsense", 400, "key=value"},
			{viewer, "GET", "/api/v1/pools?key=bad%20key!", 400, "pool key"},
			{viewer, "GET", "/api/v1/pools/pool=a%00b", 400, "NUL"},
			{viewer, "GET", "/api/v1/pools/pool=a%ffb", 400, "UTF-8"},
			{viewer, "GET", "/api/v1/pools?key=" + strings.Repeat("k", 10000), 400, "pool key"},
			{viewer, "POST", "/api/v1/pools/pool=billing/approve", 403, ""},
			{viewer, "DELETE", "/api/v1/pools/pool=billing/approve", 403, ""},
			{admin, "POST", "/api/v1/pools/pool=billing", 404, ""},
			{admin, "POST", "/api/v1/pools/pool=bad%20value!/approve", 400, "label"},
			{admin, "POST", "/api/v1/pools/pool=a,zone=b/approve", 400, "one label"},
			{admin, "POST", "/api/v1/pools/pool=" + strings.Repeat("v", 10000) + "/approve", 400, "longer than"},
			{admin, "DELETE", "/api/v1/pools/pool=billing/approve", 404, "not approved"},
		} {
			status, body := e.do(c.client, c.method, c.path, "", nil)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Errorf("%s %.60s: %d %.200s, want %d saying %q", c.method, c.path, status, body, c.status, c.says)
			}
		}

		// Approve a pool with no member yet: it exists from then on.
		status, body = e.do(admin, "POST", "/api/v1/pools/pool=spare/approve", "", nil)
		if p := decode[apiPool](t, body); status != 200 || !p.Approved || p.Label != "pool=spare" || len(p.Members) != 0 {
			t.Fatalf("approve pool=spare: %d %s", status, body)
		}
		if status, body := e.do(viewer, "GET", "/api/v1/pools/pool=spare", "", nil); status != 200 || !strings.Contains(body, `"approved":true`) {
			t.Fatalf("GET approved pool: %d %s", status, body)
		}
		// A key with a prefix holds a '/'.
		status, body = e.do(admin, "POST", "/api/v1/pools/example.com/zone=eu/approve", "", nil)
		if p := decode[apiPool](t, body); status != 200 || p.Key != "example.com/zone" || p.Value != "eu" {
			t.Fatalf("approve a prefixed key: %d %s", status, body)
		}
		if status, body := e.do(viewer, "GET", "/api/v1/pools/example.com/zone=eu", "", nil); status != 200 {
			t.Fatalf("GET a prefixed key: %d %s", status, body)
		}
		if status, body := e.do(admin, "DELETE", "/api/v1/pools/pool=spare/approve", "", nil); status != 204 {
			t.Fatalf("revoke: %d %s", status, body)
		}
		if status, _ := e.do(viewer, "GET", "/api/v1/pools/pool=spare", "", nil); status != 404 {
			t.Fatalf("GET a revoked empty pool: %d, want 404", status)
		}
		if status, _ := e.do(admin, "DELETE", "/api/v1/pools/pool=spare/approve", "", nil); status != 404 {
			t.Fatalf("revoke twice: %d, want 404", status)
		}
	})
}

// TestAPISelectors: selector in task create, update, clone and delayed
// create; the preview; refusals name the character and store nothing.
func TestAPISelectors(t *testing.T) {
	t.Parallel()
	e, admin, viewer := poolsEnv(t, storetest.OpenSQLite(t))
	const def = `"type":"http","schedule":{"kind":"cron","cron":"0 3 * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/x"}`
	status, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"sel",`+def+`,"selector":"zone in (eu-2, eu-1), pool=billing"}`, nil)
	tk := decode[master.Task](t, body)
	if status != 201 || tk.Selector != "pool=billing,zone in (eu-1,eu-2)" || !slices.Equal(tk.Selected, []string{"a"}) || len(tk.Executors) != 0 {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body = e.do(admin, "PUT", "/api/v1/tasks/"+tk.ID, `{"title":"sel",`+def+`,"selector":"pool"}`, nil)
	if u := decode[master.Task](t, body); status != 200 || u.Selector != "pool" || !slices.Equal(u.Selected, []string{"a", "b", "c"}) {
		t.Fatalf("update: %d %s", status, body)
	}
	status, body = e.do(admin, "POST", "/api/v1/tasks/"+tk.ID+"/clone", "", nil)
	if cl := decode[master.Task](t, body); status != 201 || cl.Selector != "pool" || len(cl.Selected) != 3 {
		t.Fatalf("clone: %d %s", status, body)
	}
	// The selected members come back with GET and are ignored on PUT.
	status, body = e.do(admin, "GET", "/api/v1/tasks/"+tk.ID, "", nil)
	if status != 200 || !strings.Contains(body, `"selected":["a","b","c"]`) {
		t.Fatalf("GET: %d %s", status, body)
	}
	if status, body := e.do(admin, "PUT", "/api/v1/tasks/"+tk.ID, body, nil); status != 200 {
		t.Fatalf("PUT of what GET gave: %d %s", status, body)
	}

	n := len(e.tasks())
	for sel, says := range map[string]string{`pool in billing`: "at character 9", "pool=\u0000": "NUL",
		`pool=` + strings.Repeat("x", 2000): "longer than", `!`: "at character"} {
		status, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"bad",`+def+`,"selector":`+jsonString(sel)+`}`, nil)
		if status != 400 || !strings.Contains(body, says) {
			t.Errorf("create with selector %.30q: %d %.300s, want 400 saying %q", sel, status, body, says)
		}
	}
	if len(e.tasks()) != n {
		t.Fatalf("refused tasks were stored")
	}

	// Delayed tasks take a selector too.
	status, body = e.do(admin, "POST", "/api/v1/delayed", `{"source_app":"shop","topic":"t","content_key":"k1","delay":"1h",
		"notify_url":"http://127.0.0.1:1/cb","selector":"pool=billing"}`, nil)
	if status != 201 || !strings.Contains(body, `"selector":"pool=billing"`) {
		t.Fatalf("delayed create: %d %s", status, body)
	}
	status, body = e.do(admin, "POST", "/api/v1/delayed", `{"source_app":"shop","topic":"t","content_key":"k2","delay":"1h",
		"notify_url":"http://127.0.0.1:1/cb","selector":"pool in"}`, nil)
	if status != 400 || !strings.Contains(body, "selector") {
		t.Fatalf("delayed create with a bad selector: %d %s", status, body)
	}

	// The preview.
	status, body = e.do(viewer, "GET", "/api/v1/selectors/preview?selector="+url.QueryEscape("pool = billing"), "", nil)
	if m := decode[master.SelectorMatch](t, body); status != 200 || m.Selector != "pool=billing" ||
		!slices.Equal(m.Running, []string{"a"}) || !slices.Equal(m.Others, []string{"b"}) {
		t.Fatalf("preview: %d %s", status, body)
	}
	for q, says := range map[string]string{"pool+in+billing": "at character 9", "pool%3D%00": "NUL", "pool%3D%ff": "UTF-8",
		strings.Repeat("a", 3000): "longer than"} {
		if status, body := e.do(viewer, "GET", "/api/v1/selectors/preview?selector="+q, "", nil); status != 400 || !strings.Contains(body, says) {
			t.Errorf("preview %.30q: %d %.200s, want 400 saying %q", q, status, body, says)
		}
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
