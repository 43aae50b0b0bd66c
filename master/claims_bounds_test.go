package master_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// minuteTask stores running executors a, b, c, a running non-executor
// "outsider", and a task firing at second 0 of every minute in Asia/Tokyo
// (the time zone must not matter for a whole-minute schedule).
func minuteTask(t *testing.T, e *env) string {
	t.Helper()
	for _, name := range []string{"a", "b", "c", "outsider"} {
		n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
			DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
		if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
			t.Fatal(err)
		}
	}
	tk := &store.Task{ID: "t-minute", Title: "minute", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t-minute","title":"minute","type":"http","schedule":{"kind":"cron","cron":"0 * * * * *"},"timezone":"Asia/Tokyo","http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: []string{"a", "b", "c"}}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

func claimCount(t *testing.T, e *env, task string) int {
	t.Helper()
	n, err := e.s.Store.DB.NewSelect().Model((*store.Claim)(nil)).Where("task_id = ?", task).Count(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// A claim is accepted only for a real fire of the task's schedule, not
// ahead of the master's clock by more than it decides (too early: the time
// to come back), by one of its executors; every refusal stores nothing and
// says why.
func TestClaimOnlyRealDueFires(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := minuteTask(t, e)
		minute := time.Now().UTC().Truncate(time.Minute)
		refused := []struct {
			name, node string
			fire       time.Time
			kind       master.Kind
			says       string
		}{
			{"a year ahead", "a", minute.AddDate(1, 0, 0), master.KindTooEarly, "ahead of the master's clock"},
			{"six minutes ahead", "a", minute.Add(6 * time.Minute), master.KindTooEarly, "ahead of the master's clock"},
			{"three minutes ahead", "a", minute.Add(3 * time.Minute), master.KindTooEarly, "ahead of the master's clock"},
			{"between two fires", "a", minute.Add(-2*time.Minute + 30*time.Second), master.KindInvalid, "not a fire"},
			{"a millisecond off", "a", minute.Add(-time.Minute + time.Millisecond), master.KindInvalid, "not a fire"},
			{"long ago", "a", minute.AddDate(0, 0, -40), master.KindInvalid, "in the past"},
			{"not an executor", "outsider", minute, master.KindForbidden, "does not execute"},
		}
		for _, c := range refused {
			_, err := e.m.Claim(e.ctx, e.node(c.node), protocol.ClaimRequest{TaskID: id, FireAt: c.fire})
			if master.KindOf(err) != c.kind || !strings.Contains(master.Message(err), c.says) {
				t.Errorf("%s: %v, want a %v refusal saying %q", c.name, err, c.kind, c.says)
			}
			if c.kind == master.KindTooEarly {
				if ra, want := master.RetryAfter(err), c.fire.Sub(time.Now())-master.ClaimSkew; ra > want+time.Second || ra < want-10*time.Second {
					t.Errorf("%s: retry after %s, want about %s", c.name, ra, want)
				}
			}
		}
		if n := claimCount(t, e, id); n != 0 {
			t.Fatalf("refused claims stored %d rows", n)
		}
		// Real fires: now, a little late and a catch-up an hour late are decided.
		for _, fire := range []time.Time{minute, minute.Add(-time.Minute), minute.Add(-time.Hour)} {
			resp, err := e.m.Claim(e.ctx, e.node("a"), protocol.ClaimRequest{TaskID: id, FireAt: fire})
			if err != nil || resp.Winner == "" {
				t.Fatalf("real fire %s: %+v %v", fire, resp, err)
			}
		}
	})
}

// Over real HTTP a claim too early is a 425 with a sentence and Retry-After,
// and the master logs the node and the reason.
func TestClaimRefusalOverHTTPIsLogged(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	e, logs := newEnvLogged(t, s)
	id := minuteTask(t, e)
	srv := httptest.NewServer(e.masterAPI())
	t.Cleanup(srv.Close)
	a := e.node("a")
	body := fmt.Sprintf(`{"task_id":%q,"fire_at":%q}`, id, time.Now().UTC().AddDate(1, 0, 0).Truncate(time.Minute).Format(time.RFC3339))
	req, _ := http.NewRequest("POST", srv.URL+protocol.PathMasterClaim, strings.NewReader(body))
	req.Header.Set(protocol.HeaderNode, "a")
	req.Header.Set(protocol.HeaderSecret, a.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooEarly || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a claim a year ahead: %d (Retry-After %q), want 425 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if out := logs(); !strings.Contains(out, "claim refused") || !strings.Contains(out, "node=a") || !strings.Contains(out, "ahead") {
		t.Fatalf("the refusal is not logged with node and reason:\n%.2000s", out)
	}
}

// Executors racing with a mix of real fires, fake ones and fires not due:
// exactly one winner per real fire, nothing else ever stored.
func TestClaimRaceRealAndFakeFires(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		m2 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-b" })
		id := minuteTask(t, e)
		minute := time.Now().UTC().Truncate(time.Minute)
		const real = 12
		var fires []time.Time
		for i := range real {
			fires = append(fires, minute.Add(-time.Duration(i+1)*time.Minute))
		}
		fakes := []time.Time{minute.AddDate(1, 0, 0), minute.Add(10 * time.Minute), minute.Add(-90 * time.Second), minute.Add(7 * time.Second)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := map[time.Time]int{}
		fakeOK := 0
		for _, name := range []string{"a", "b", "c"} {
			for i, fire := range append(append([]time.Time{}, fires...), fakes...) {
				wg.Go(func() {
					m := []*master.Master{e.m, m2}[i%2]
					resp, err := m.Claim(e.ctx, e.node(name), protocol.ClaimRequest{TaskID: id, FireAt: fire})
					mu.Lock()
					defer mu.Unlock()
					isReal := fire.Before(minute) && fire.Sub(fire.Truncate(time.Minute)) == 0
					switch {
					case !isReal && err == nil:
						fakeOK++
					case isReal && err != nil:
						t.Errorf("real fire %s by %s: %v", fire, name, err)
					case isReal && resp.Won:
						wins[fire]++
					case !isReal && fire.After(time.Now().Add(master.ClaimSkew+master.ClaimHold)) && master.KindOf(err) != master.KindTooEarly:
						t.Errorf("fire not due %s by %s: %v, want too early", fire, name, err)
					case !isReal && fire.Before(time.Now()) && !errors.Is(err, master.ErrInvalid):
						t.Errorf("fake fire %s by %s: %v, want invalid", fire, name, err)
					}
				})
			}
		}
		wg.Wait()
		if fakeOK != 0 {
			t.Fatalf("%d fake claims accepted", fakeOK)
		}
		for _, f := range fires {
			if wins[f] != 1 {
				t.Errorf("fire %s: %d winners, want 1", f, wins[f])
			}
		}
		if n := claimCount(t, e, id); n != real {
			t.Fatalf("%d claims stored, want %d (the real fires only)", n, real)
		}
	})
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newEnvLogged is newEnv with the master's log kept for the test to read.
func newEnvLogged(t *testing.T, s storetest.NamedStore) (*env, func() string) {
	t.Helper()
	buf := &lockedBuffer{}
	m := master.New(master.Config{
		Identity: masterName, ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health:      master.HealthConfig{Interval: time.Second, Timeout: probeTimeout, MaxFailures: 3},
		CallTimeout: 5 * time.Second, ShutdownWait: 2 * time.Second,
	}, s.Store, slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	return &env{t: t, ctx: storetest.Ctx(t), s: s, m: m}, buf.String
}
