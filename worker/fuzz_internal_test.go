package worker

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// FuzzConnectHeaders: Connect never panics and never accepts a request
// without the right MAC.
func FuzzConnectHeaders(f *testing.F) {
	const key, master = "fuzz-cluster-key-0123456789", "master"
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body, _ := json.Marshal(protocol.ConnectRequest{Node: protocol.NodeConfig{Name: "w1", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 5}})
	nonce := "0123456789abcdef0123456789abcdef"
	f.Add(master, "w1", ts, nonce, protocol.ConnectMAC(key, master, "w1", ts, nonce), body)
	f.Add("other", "w1", ts, nonce, protocol.ConnectMAC(key, "other", "w1", ts, nonce), body)
	f.Add("", "w1", "x", "n", "zz", []byte(`{}`))
	f.Add(master, "", "", "", "", []byte(nil))
	w, err := New(Config{Identity: "", Protocol: "http", IP: "127.0.0.1", Port: 30001, Priority: 1, MaxConcurrency: 5,
		ClusterKey: key, WorkerOf: master, StopTimeout: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, hMaster, nameTo, timestamp, nonce, mac string, body []byte) {
		var req protocol.ConnectRequest
		_ = json.Unmarshal(body, &req)
		resp, err := w.Connect(ConnectHeaders{Master: hMaster, NameTo: nameTo, Timestamp: timestamp, Nonce: nonce, MAC: mac}, req, now)
		if err != nil {
			if resp.Secret != "" {
				t.Fatal("a refused Connect returned a secret")
			}
			return
		}
		if !protocol.EqualMAC(mac, protocol.ConnectMAC(key, master, nameTo, timestamp, nonce)) {
			t.Fatalf("accepted without the right MAC: %q %q %q %q %q", hMaster, nameTo, timestamp, nonce, mac)
		}
	})
}

// FuzzTailBuffer: whatever is written, the output is valid UTF-8 without NUL,
// within its bound, and names what it cut.
func FuzzTailBuffer(f *testing.F) {
	f.Add([]byte("hello"), uint16(100), uint8(1))
	f.Add([]byte("x\xc3\xa9\xc3\xa9\xc3\xa9\x00\xff\xfe"), uint16(3), uint8(3))
	f.Add([]byte("\x89PNG\r\n\x1a\n\x00\x00"), uint16(4), uint8(2))
	f.Add([]byte("日本語のテキスト"), uint16(5), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, max uint16, step uint8) {
		m := 1 + int(max)%512
		b := &tailBuffer{max: m}
		n := 1 + int(step)
		for i := 0; i < len(data); i += n {
			b.Write(data[i:min(i+n, len(data))])
		}
		checkTail(t, b, m, len(data))
	})
}
