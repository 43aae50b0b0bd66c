package handlers_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A running node whose clock is 3.2 s ahead shows a clock skew badge with the
// reason on the nodes list and its page (in Chinese too), and the skew in
// /api/v1/nodes; within a second it shows none, and the API says so.
func TestClockSkewShownOnTheConsoleAndTheAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		ctx := storetest.Ctx(t)
		startStoppableWorker(t, e, "w1")
		c := e.login("admin", "admin-password-1")
		type skewNode struct {
			Name            string `json:"name"`
			ClockSkewMS     *int64 `json:"clock_skew_ms"`
			ClockSkewed     bool   `json:"clock_skewed"`
			ClockSkewReason string `json:"clock_skew_reason"`
		}
		apiNodes := func() []skewNode {
			status, body := e.do(e.client(), "GET", "/api/v1/nodes", "", e.bearer("ops"))
			if status != http.StatusOK {
				t.Fatalf("GET /api/v1/nodes: %d %s", status, body)
			}
			return decode[[]skewNode](t, body)
		}
		set := func(ms int64) {
			if err := store.SetClockSkews(ctx, e.st.DB, map[string]int64{"w1": ms}, nil); err != nil {
				t.Fatal(err)
			}
		}

		set(400)
		if _, list := e.do(c, "GET", "/nodes", "", nil); strings.Contains(list, `data-testid="clock-skew"`) {
			t.Fatal("a node 0.4 s off is shown with a clock skew")
		}
		if n := apiNodes(); len(n) != 1 || n[0].ClockSkewMS == nil || *n[0].ClockSkewMS != 400 || n[0].ClockSkewed || n[0].ClockSkewReason != "" {
			t.Fatalf("API nodes %+v, want w1 at 400 ms, not skewed", n)
		}

		set(3200)
		const reason = "its clock is 3.2 s ahead of the master's"
		shown := html.EscapeString(reason)
		_, list := e.do(c, "GET", "/nodes", "", nil)
		if want := `data-testid="clock-skew" title="` + shown + `">clock skew</span>`; !strings.Contains(list, want) {
			t.Errorf("nodes list lacks %s", want)
		}
		_, page := e.do(c, "GET", "/nodes/w1", "", nil)
		for _, want := range []string{`data-testid="clock-skew"`, `id="node-clock-skew">` + shown + `</span>`} {
			if !strings.Contains(page, want) {
				t.Errorf("node page lacks %s", want)
			}
		}
		zh := map[string]string{"Accept-Language": "zh-CN"}
		if _, page := e.do(c, "GET", "/nodes/w1", "", zh); !strings.Contains(page, "时钟偏差") || !strings.Contains(page, "其时钟比主节点快 3.2 秒") {
			t.Error("the Chinese node page lacks the clock skew badge or its reason")
		}
		n := apiNodes()
		if len(n) != 1 || n[0].ClockSkewMS == nil || *n[0].ClockSkewMS != 3200 || !n[0].ClockSkewed || n[0].ClockSkewReason != reason {
			t.Fatalf("API nodes %+v, want w1 at 3200 ms, skewed, %q", n, reason)
		}

		set(-2500)
		if n := apiNodes(); !n[0].ClockSkewed || n[0].ClockSkewReason != "its clock is 2.5 s behind the master's" {
			t.Errorf("API node behind: %+v", n[0])
		}
	})
}
