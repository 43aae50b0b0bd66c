package handlers_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// registerAs posts a signed registration of name to the real route and
// returns the status, the body and the secret it sent.
func (e *env) registerAs(name, host string, key ed25519.PrivateKey) (int, string, string) {
	e.t.Helper()
	secret := protocol.NewSecret()
	body, _ := json.Marshal(protocol.RegisterRequest{
		Node:   protocol.NodeConfig{Name: name, Protocol: "http", Host: host, Priority: 1, MaxConcurrency: 2},
		Secret: secret, BootID: protocol.NewNonce(), MachineName: "box",
		NodeKey: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
	})
	ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), protocol.NewNonce()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+protocol.PathMasterRegister, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(protocol.HeaderNode, name)
	req.Header.Set(protocol.HeaderTimestamp, ts)
	req.Header.Set(protocol.HeaderNonce, nonce)
	req.Header.Set(protocol.HeaderSignature, protocol.RegisterMAC(clusterKey, name, ts, nonce, body))
	req.Header.Set(protocol.HeaderNodeSignature, protocol.SignRegistration(key, name, ts, nonce, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), secret
}

func newNodeKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Through the real router: a name bound to one machine's key refuses
// another's (409, nothing changed) until an admin resets its identity, from
// the API or the console.
func TestResetIdentityRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("viewer", "viewer-password-1", store.RoleViewer)
	k1 := newNodeKey(t)
	if code, body, _ := e.registerAs("w1", "127.0.0.1:30001", k1); code != http.StatusOK {
		t.Fatalf("first registration: %d %s", code, body)
	}
	before := e.node("w1")
	code, body, _ := e.registerAs("w1", "10.6.6.6:1", newNodeKey(t))
	if code != http.StatusConflict || !strings.Contains(body, "reset its identity") {
		t.Fatalf("takeover: %d %s, want 409 naming reset identity", code, body)
	}
	if after := e.node("w1"); after.Host != before.Host || after.Secret != before.Secret || after.Mode != before.Mode {
		t.Fatalf("a refused takeover changed the node: %+v", after)
	}
	if code, body, _ := e.registerAs("W1", "10.6.6.6:1", newNodeKey(t)); code != http.StatusConflict {
		t.Fatalf("W1 beside w1: %d %s, want 409", code, body)
	}

	admin := e.login("admin", "admin-password-1")
	viewer := e.login("viewer", "viewer-password-1")
	page := func() string {
		_, b := e.do(admin, http.MethodGet, "/nodes", "", nil)
		return b
	}
	if !strings.Contains(page(), `data-action="reset-identity" data-node="w1"`) {
		t.Fatal("the nodes page offers no Reset identity for a bound auto node")
	}
	if code, _ := e.do(viewer, http.MethodPost, "/api/v1/nodes/w1/reset-identity", "", nil); code != http.StatusForbidden {
		t.Fatalf("viewer reset: %d, want 403", code)
	}
	code, body = e.do(admin, http.MethodPost, "/api/v1/nodes/w1/reset-identity", "", nil)
	if code != http.StatusOK || !strings.Contains(body, `"name":"w1"`) {
		t.Fatalf("API reset: %d %s", code, body)
	}
	if n := e.node("w1"); n.NodeKey != "" {
		t.Fatalf("node key after reset: %q", n.NodeKey)
	}
	k2 := newNodeKey(t)
	if code, body, _ := e.registerAs("w1", "127.0.0.1:30002", k2); code != http.StatusOK {
		t.Fatalf("registration after reset: %d %s", code, body)
	}
	// The console action (a plain form post is redirected back to the nodes page).
	resp := e.postForm(admin, "/nodes/w1/reset-identity", nil)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console reset: %d", resp.StatusCode)
	}
	if n := e.node("w1"); n.NodeKey != "" {
		t.Fatal("console reset left the key")
	}
	if code, _ := e.do(admin, http.MethodPost, "/api/v1/nodes/nobody/reset-identity", "", nil); code != http.StatusNotFound {
		t.Fatalf("reset of an unknown node: %d", code)
	}
}

// Through the real routes: a batch with a binary output and a forged run is
// answered run by run; the binary run is shown flagged on the API and page;
// a claim of a task the node does not execute is 403.
func TestWorkerRunsRouteAnswersPerRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	code, body, secret := e.registerAs("w1", "127.0.0.1:30001", newNodeKey(t))
	if code != http.StatusOK {
		t.Fatalf("registration: %d %s", code, body)
	}
	ctx := context.Background()
	tk := &store.Task{ID: "t1", Title: "t1", Type: "http", Status: store.TaskStopped, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t1","title":"t1","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: []string{"w1"}}
	if err := store.CreateTask(ctx, e.st.DB, tk); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	run := func(id, task string) protocol.RunReport {
		return protocol.RunReport{ID: id, TaskID: task, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: "ok"}
	}
	bin := run("bin", "t1")
	bin.Output = "\x89PNG\r\n\x1a\n\x00\x00"
	batch, _ := json.Marshal(protocol.RunsRequest{Runs: []protocol.RunReport{run("good", "t1"), bin, run("forged", "no-such-task")}})
	hdr := map[string]string{protocol.HeaderNode: "w1", protocol.HeaderSecret: secret}
	code, body = e.do(http.DefaultClient, http.MethodPost, protocol.PathMasterRuns, string(batch), hdr)
	if code != http.StatusOK {
		t.Fatalf("runs: %d %s", code, body)
	}
	var resp protocol.RunsResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Accepted != 2 || len(resp.Rejected) != 1 || resp.Rejected[0].ID != "forged" {
		t.Fatalf("runs answer: %s (%v)", body, err)
	}
	admin := e.login("admin", "admin-password-1")
	code, body = e.do(admin, http.MethodGet, "/api/v1/runs/bin", "", nil)
	if code != http.StatusOK || !strings.Contains(body, `"binary_output":true`) || !strings.Contains(body, `\ufffdPNG`) && !strings.Contains(body, "\uFFFDPNG") {
		t.Fatalf("run API: %d %s", code, body)
	}
	if _, page := e.do(admin, http.MethodGet, "/runs/bin", "", nil); !strings.Contains(page, `id="binary-output"`) {
		t.Fatal("the run page does not say the output is binary")
	}
	if _, page := e.do(admin, http.MethodGet, "/runs/good", "", nil); strings.Contains(page, `id="binary-output"`) {
		t.Fatal("the run page calls a text output binary")
	}
	claim, _ := json.Marshal(protocol.ClaimRequest{TaskID: "other-task", FireAt: now})
	// The claim path and its old name, kept as an alias, answer alike.
	for _, path := range []string{protocol.PathMasterClaim, protocol.PathMasterLock} {
		if code, body := e.do(http.DefaultClient, http.MethodPost, path, string(claim), hdr); code != http.StatusForbidden {
			t.Fatalf("claim of a task not executed on %s: %d %s, want 403", path, code, body)
		}
	}
}
