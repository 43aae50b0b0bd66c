package master_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// fuzzMaster is a master over a fresh SQLite store with worker w1 executing task t1.
func fuzzMaster(f *testing.F) (*master.Master, *store.Store, *store.Node) {
	s := storetest.OpenSQLite(f)
	m := master.New(master.Config{Identity: masterName, ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1"}, s.Store, storetest.Discard())
	f.Cleanup(func() { m.Stop(context.Background()) })
	ctx := context.Background()
	n := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
		Priority: 1, MaxConcurrency: 1, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
	if err := store.CreateNode(ctx, s.Store.DB, n); err != nil {
		f.Fatal(err)
	}
	tk := &store.Task{ID: "t1", Title: "t1", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec:      `{"id":"t1","title":"t1","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
		Executors: []string{"w1"}}
	if err := store.CreateTask(ctx, s.Store.DB, tk); err != nil {
		f.Fatal(err)
	}
	return m, s.Store, n
}

// FuzzIngestRuns sends arbitrary run reports, next to a good one, through
// IngestRuns on SQLite: the batch never fails whole, the good run is always
// stored, and every stored output is valid UTF-8 without NUL.
func FuzzIngestRuns(f *testing.F) {
	f.Add("r1", "t1", "w1", []byte("ok"), int64(0), int64(5), 0, 200, "success", 1, false)
	f.Add("r2", "t1", "w1", []byte("a\x00b\xff\xfe"), int64(-60), int64(0), 1, 0, "failed", 1, true)
	f.Add("r3", "t1", "w1", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), int64(0), int64(1), -1, 500, "timeout", 2, false)
	f.Add("r'4", "t1'; DROP TABLE runs; --", "w2", []byte("x"), int64(3600), int64(-1), 1<<40, 70000, "great", 0, false)
	f.Add("r\x005", "t1", "w1", []byte(""), int64(-1<<40), int64(1<<62), 0, 0, "skipped", 11, false)
	m, st, node := fuzzMaster(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, id, taskID, nodeName string, output []byte, startOffset, durMS int64, exit, status int, result string, attempt int, manual bool) {
		now := time.Now()
		started := now.Add(time.Duration(startOffset) * time.Second)
		odd := protocol.RunReport{ID: id, TaskID: taskID, Node: nodeName, ScheduledAt: started, StartedAt: started,
			EndedAt: started.Add(time.Duration(durMS) * time.Millisecond), DurationMS: durMS, Result: protocol.Result(result), Attempt: attempt,
			HTTPStatus: status, ExitCode: &exit, Output: string(output), Manual: manual}
		good := protocol.RunReport{ID: uuid.NewString(), TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: protocol.ResultSuccess, Attempt: 1, Output: "fine"}
		resp, err := m.Runs().Ingest(ctx, node, []protocol.RunReport{odd, good})
		if err != nil {
			t.Fatalf("the batch failed whole: %v", err)
		}
		if resp.Accepted+resp.Duplicates+len(resp.Rejected) != 2 {
			t.Fatalf("answer does not account for every run: %+v", resp)
		}
		if _, err := store.GetRun(ctx, st.DB, good.ID); err != nil {
			t.Fatalf("the good run was not stored: %v", err)
		}
		for _, r := range resp.Rejected {
			if r.ID == good.ID {
				t.Fatalf("the good run was rejected: %s", r.Error)
			}
		}
		if r, err := store.GetRun(ctx, st.DB, id); err == nil {
			if !utf8.ValidString(r.Output) || strings.ContainsRune(r.Output, 0) {
				t.Fatalf("stored output %q is not clean UTF-8", r.Output)
			}
			if r.StartedAt.After(time.Now().Add(protocol.MaxClockSkew)) {
				t.Fatalf("a run from the future was stored: %v", r.StartedAt)
			}
		}

		// The same batch as a worker sends it, read by the streaming
		// decoder (IngestBatch): it is read whole, and the good run stored.
		good.ID = uuid.NewString()
		body, err := json.Marshal(protocol.RunsRequest{Runs: []protocol.RunReport{odd, good}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err = m.Runs().IngestBatch(ctx, node, bytes.NewReader(body), int64(len(body)))
		if err != nil {
			t.Fatalf("the encoded batch failed whole: %v", err)
		}
		if resp.Accepted+resp.Duplicates+len(resp.Rejected) != 2 {
			t.Fatalf("answer does not account for every run: %+v", resp)
		}
		if _, err := store.GetRun(ctx, st.DB, good.ID); err != nil {
			t.Fatalf("the good run of the encoded batch was not stored: %v", err)
		}
		// The same bytes cut short, or with bytes in the way, store nothing
		// and fail as a whole with a refusal (never a server error).
		for _, bad := range [][]byte{body[:len(body)/2], append(bytes.Clone(body[:len(body)-1]), output...)} {
			if _, err := m.Runs().IngestBatch(ctx, node, bytes.NewReader(bad), -1); err == nil {
				if !json.Valid(bad) {
					t.Fatalf("a broken batch was accepted: %q", bad)
				}
			} else if k := master.KindOf(err); k != master.KindInvalid && k != master.KindTooLarge {
				t.Fatalf("a broken batch failed as %v: %v", k, err)
			}
		}
	})
}

// FuzzRegisterHeaders sends arbitrary headers and bodies to Register: it
// never panics and never accepts a registration without a valid cluster-key
// MAC. With sign set, the body is signed properly (MAC and node key), so the
// fuzzer also reaches the decoding and identity rules.
func FuzzRegisterHeaders(f *testing.F) {
	valid, _ := json.Marshal(protocol.RegisterRequest{
		Node:   protocol.NodeConfig{Name: "f1", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 1},
		Secret: strings.Repeat("ab", 32), BootID: "boot", MachineName: "box", NodeKey: "",
	})
	f.Add("f1", "0", "nonce", "sig", "nodesig", valid, false)
	f.Add("f1", "", "", "", "", valid, true)
	f.Add("w\x00", "99999999999999999999", strings.Repeat("n", 300), "zz", "", []byte(`{"node":{"name":"w\u0000"}}`), true)
	f.Add("MASTER", "1", "x", "00", "00", []byte(`{"node":{"name":"MASTER"},"mode":"manual"}`), true)
	f.Add("f2", "1", "x", "00", "00", []byte(`{} trailing`), true)
	m, _, _ := fuzzMaster(f)
	_, key, _ := ed25519.GenerateKey(nil)
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, node, ts, nonce, sig, nodeSig string, body []byte, sign bool) {
		if sign {
			// Put our public key in the body when it asks for one, then sign.
			body = []byte(strings.Replace(string(body), `"node_key":""`, `"node_key":"`+pub+`"`, 1))
			ts = strconv.FormatInt(time.Now().Unix(), 10)
			nonce = protocol.NewNonce()
			sig = protocol.RegisterMAC(clusterKey, node, ts, nonce, body)
			nodeSig = protocol.SignRegistration(key, node, ts, nonce, body)
		}
		h := master.RegisterHeaders{Node: node, Timestamp: ts, Nonce: nonce, Signature: sig, NodeSignature: nodeSig}
		resp, err := m.Register(ctx, h, body)
		if err != nil {
			return
		}
		if !sign || !protocol.EqualMAC(sig, protocol.RegisterMAC(clusterKey, node, ts, nonce, body)) {
			t.Fatalf("accepted a registration without a valid MAC: %+v", h)
		}
		if resp.Master != masterName {
			t.Fatalf("accepted registration answered master %q", resp.Master)
		}
	})
}

// FuzzClaim sends arbitrary claim bodies through the worker API's decoder
// (DecodeStrict) and Claim: nothing panics, and a claim is won only for a
// real fire of the task (every whole hour) no more than ClaimSkew ahead
// and MaxClaimAge behind.
func FuzzClaim(f *testing.F) {
	hour := time.Now().UTC().Truncate(time.Hour)
	for _, body := range []string{
		`{"task_id":"t1","fire_at":"` + hour.Format(time.RFC3339) + `"}`,
		`{"task_id":"t1","fire_at":"` + hour.AddDate(1, 0, 0).Format(time.RFC3339) + `"}`,
		`{"task_id":"t1","fire_at":"` + hour.Add(30*time.Minute).Format(time.RFC3339Nano) + `"}`,
		`{"task_id":"t1","fire_at":"0001-01-01T00:00:00Z"}`,
		`{"task_id":"t1","fire_at":"9999-12-31T23:59:59.999999999Z"}`,
		`{"task_id":"t1'; --","fire_at":"` + hour.Format(time.RFC3339) + `"}`,
		`{"task_id":"t1","fire_at":"` + hour.Format(time.RFC3339) + `","extra":1}`,
		`{"task_id":"t1"}`, `null`, `[]`, `{"fire_at":1}`,
	} {
		f.Add([]byte(body))
	}
	m, _, node := fuzzMaster(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		var req protocol.ClaimRequest
		if err := protocol.DecodeStrict(body, &req); err != nil {
			return // the handler answers 400
		}
		resp, err := m.Claim(ctx, node, req)
		if err != nil || !resp.Won {
			return
		}
		fire, now := req.FireAt.UTC(), time.Now()
		if !fire.Equal(fire.Truncate(time.Hour)) || fire.After(now.Add(master.ClaimSkew)) || fire.Before(now.Add(-master.MaxClaimAge)) {
			t.Fatalf("won a claim of %s, which is not a due fire of the hourly task", fire.Format(time.RFC3339Nano))
		}
	})
}
