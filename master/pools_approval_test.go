package master_test

import (
	"crypto/ed25519"
	"slices"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestHardening3PoolsAreApprovedLabelByLabel: with approval on, a node gets
// tasks only through labels an admin approved for it. A node that came in
// through pool=beta and re-registers (same name, same key) declaring
// pool=alpha gets none of alpha's tasks (nor their secrets) until an admin
// approves its labels; approving zone=eu lets a newcomer in, but not into
// the pool=alpha it also declares.
func TestHardening3PoolsAreApprovedLabelByLabel(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		e := newEnv(t, s)
		e.addMasterNode()
		set, _ := e.m.Settings()
		set.ApproveNewNodes = true
		if err := e.m.UpdateSettings(e.ctx, set); err != nil {
			t.Fatal(err)
		}
		keys := map[string]ed25519.PrivateKey{}
		register := func(name string, labels protocol.Labels) ([]string, error) {
			t.Helper()
			if keys[name] == nil {
				_, priv, err := ed25519.GenerateKey(nil)
				if err != nil {
					t.Fatal(err)
				}
				keys[name] = priv
			}
			req := newcomer(name, protocol.DefaultPriority)
			req.Labels = labels
			h, body := signedRegistrationWith(t, clusterKey, keys[name], req, time.Now())
			if _, err := e.m.Register(e.ctx, h, body); err != nil {
				return nil, err
			}
			// Who alpha's selector selects: its tasks (and their secrets) go
			// to them alone.
			m, err := e.m.Pools().MatchSelector(e.ctx, "pool=alpha")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if slices.Contains(append(m.Running, m.Others...), name) {
				got = append(got, "alpha-job")
			}
			return got, nil
		}
		// wa: approved by an admin, in alpha.
		if _, err := register("wa", protocol.Labels{"pool": "alpha"}); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("a new name with approval on: %v, want it pending", err)
		}
		if _, err := e.m.Nodes().Approve(e.ctx, "wa"); err != nil {
			t.Fatal(err)
		}
		if _, err := register("wa", protocol.Labels{"pool": "alpha"}); err != nil {
			t.Fatal(err)
		}
		in := httpInput()
		in.Title, in.Selector = "alpha-job", "pool=alpha"
		in.HTTP.Headers = map[string]string{"Authorization": "Bearer alpha-secret"}
		if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); err != nil {
			t.Fatal(err)
		}
		if got, err := register("wa", protocol.Labels{"pool": "alpha"}); err != nil || !slices.Contains(got, "alpha-job") {
			t.Fatalf("the approved member of alpha gets %v, %v; want alpha-job", got, err)
		}
		// w1 comes in through the approved pool beta, then declares alpha.
		if err := e.m.Pools().Approve(e.ctx, "pool=beta", "admin"); err != nil {
			t.Fatal(err)
		}
		if got, err := register("w1", protocol.Labels{"pool": "beta"}); err != nil || slices.Contains(got, "alpha-job") {
			t.Fatalf("w1 in beta: %v, %v; want in, with no task", got, err)
		}
		got, err := register("w1", protocol.Labels{"pool": "alpha"})
		if err != nil || slices.Contains(got, "alpha-job") {
			t.Fatalf("w1 re-registered declaring pool=alpha gets %v, %v; want none of alpha's tasks", got, err)
		}
		n := e.node("w1")
		if p := master.PendingLabels(n); p["pool"] != "alpha" {
			t.Fatalf("w1's labels waiting for approval: %v, want pool=alpha", p)
		}
		if l := master.NodeLabels(n); l["pool"] != "" {
			t.Fatalf("w1's labels in force %v, want no pool", l)
		}
		// A newcomer of an approved zone declares alpha too: in, not in alpha.
		if err := e.m.Pools().Approve(e.ctx, "zone=eu", "admin"); err != nil {
			t.Fatal(err)
		}
		got, err = register("w2", protocol.Labels{"zone": "eu", "pool": "alpha"})
		if err != nil || slices.Contains(got, "alpha-job") {
			t.Fatalf("a newcomer of zone=eu declaring pool=alpha gets %v, %v; want in, without alpha's tasks", got, err)
		}
		if l := master.NodeLabels(e.node("w2")); l["zone"] != "eu" || l["pool"] != "" {
			t.Fatalf("w2's labels in force %v, want zone=eu only", l)
		}
		// An admin approves w1's labels: now it is a member of alpha.
		if _, err := e.m.Nodes().Approve(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if got, err := register("w1", protocol.Labels{"pool": "alpha"}); err != nil || !slices.Contains(got, "alpha-job") {
			t.Fatalf("w1 after its labels' approval gets %v, %v; want alpha-job", got, err)
		}
		if p := master.PendingLabels(e.node("w1")); len(p) != 0 {
			t.Fatalf("w1 still has labels waiting: %v", p)
		}
		// With approval off, declared labels select as before.
		set.ApproveNewNodes = false
		if err := e.m.UpdateSettings(e.ctx, set); err != nil {
			t.Fatal(err)
		}
		if got, err := register("w2", protocol.Labels{"zone": "eu", "pool": "alpha"}); err != nil || !slices.Contains(got, "alpha-job") {
			t.Fatalf("w2 with approval off gets %v, %v; want alpha-job", got, err)
		}
	})
}
