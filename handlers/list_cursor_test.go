package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestListsPageByCursorStableUnderInserts: walking the task and delayed
// lists by ?after= cursor returns every item that existed when the walk
// began exactly once, in order, while new items arrive between pages (an
// offset walk would repeat items then); a bad cursor is a 400.
func TestListsPageByCursorStableUnderInserts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		ctx := context.Background()
		if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1", Protocol: "http", Priority: 1}); err != nil {
			t.Fatal(err)
		}
		seq := 0
		newTask := func() string {
			seq++
			tk, err := e.m.Tasks().Create(ctx, master.TaskInput{Executors: []string{"w1"}, TaskDef: protocol.TaskDef{
				Title: fmt.Sprintf("t%02d", seq), Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"},
				Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}}}, "admin")
			if err != nil {
				t.Fatal(err)
			}
			return tk.ID
		}
		newDelayed := func() string {
			seq++
			d, _, err := e.m.Delayed().CreateDelayed(ctx, master.DelayedInput{SourceApp: "app", Topic: "t", ContentKey: fmt.Sprint(seq),
				Delay: json.RawMessage(`"1h"`), NotifyURL: "http://127.0.0.1:1/x", Executors: []string{"w1"}}, "admin")
			if err != nil {
				t.Fatal(err)
			}
			return d.ID
		}
		runTask := newTask()
		base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		newRun := func() string {
			seq++
			at := base.Add(time.Duration(seq) * time.Second)
			if seq > 100 {
				at = time.Now().UTC() // arrived during the walk: newer than any cursor
			}
			r := store.Run{ID: fmt.Sprintf("run-%03d", seq), TaskID: runTask, Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at,
				Result: "success", Attempt: 1, Output: "ok"}
			if _, err := store.InsertRuns(ctx, e.st.DB, []store.Run{r}); err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		newEvent := func() string {
			seq++
			ev := &store.Event{At: time.Now(), Actor: "admin", Action: "test.cursor", TargetType: "task", Target: fmt.Sprint(seq), Outcome: "ok"}
			if err := store.AddEvent(ctx, e.st.DB, ev); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(ev.ID)
		}
		c := e.login("admin", "admin-password-1")
		for _, list := range []struct {
			path string
			add  func() string
		}{{"/api/v1/tasks", newTask}, {"/api/v1/delayed", newDelayed}, {"/api/v1/runs?task=" + runTask, newRun}, {"/api/v1/events?action=test.cursor", newEvent}} {
			before := map[string]bool{}
			for range 7 {
				before[list.add()] = true
			}
			if list.path == "/api/v1/tasks" {
				before[runTask] = true // the runs' task existed too
			}
			if strings.HasPrefix(list.path, "/api/v1/runs") {
				seq = 100 // runs added from now on are newer than the walk's
			}
			seen := map[string]int{}
			var order []string
			after := ""
			for page := 0; page < 10; page++ {
				q := url.Values{"limit": {"3"}}
				if after != "" {
					q.Set("after", after)
				}
				sep := "?"
				if strings.Contains(list.path, "?") {
					sep = "&"
				}
				st, body := e.do(c, "GET", list.path+sep+q.Encode(), "", nil)
				if st != http.StatusOK {
					t.Fatalf("%s page %d: %d %s", list.path, page, st, body)
				}
				var p struct {
					Items []struct {
						ID json.RawMessage `json:"id"` // a string, or an event's number
					} `json:"items"`
					Next string `json:"next"`
				}
				if err := json.Unmarshal([]byte(body), &p); err != nil {
					t.Fatal(err)
				}
				for _, it := range p.Items {
					id := strings.Trim(string(it.ID), `"`)
					seen[id]++
					order = append(order, id)
				}
				list.add() // a new item between pages: newer than every cursor, never in the walk
				if p.Next == "" {
					break
				}
				after = p.Next
			}
			for id := range before {
				if seen[id] != 1 {
					t.Errorf("%s: item %s seen %d times in the cursor walk, want once", list.path, id, seen[id])
				}
			}
			if len(order) != len(before) {
				t.Errorf("%s: the walk gave %d items, want the %d that existed", list.path, len(order), len(before))
			}
			sep := "?"
			if strings.Contains(list.path, "?") {
				sep = "&"
			}
			if st, body := e.do(c, "GET", list.path+sep+"after=not-a-cursor", "", nil); st != http.StatusBadRequest {
				t.Errorf("%s with a bad cursor: %d %s, want 400", list.path, st, body)
			}
		}
	})
}
