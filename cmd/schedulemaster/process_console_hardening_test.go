package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestMasterServerCutsTrickledBody: a client that sends its body one byte at
// a time is cut off at the read timeout instead of holding the connection.
func TestMasterServerCutsTrickledBody(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	})
	srv := masterHTTPServer(masterConfig{ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: time.Second}, h, storetest.Discard())
	if srv.ReadTimeout != 300*time.Millisecond || srv.MaxHeaderBytes != defMaxHeaderBytes || srv.ReadHeaderTimeout > srv.ReadTimeout {
		t.Fatalf("server limits: %+v", srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	sent := 0
	var werr error
	for time.Now().Before(deadline) {
		if _, werr = conn.Write([]byte("x")); werr != nil {
			break
		}
		sent++
		select {
		case err := <-readErr:
			if err == nil {
				t.Fatal("the handler read the whole trickled body")
			}
			return // cut off: the handler's read failed at the deadline
		case <-time.After(20 * time.Millisecond):
		}
	}
	if werr == nil {
		t.Fatalf("a trickled body (%d bytes sent) was not cut off within 20s", sent)
	}
}

// TestMasterServerDefaults: without settings the server has every limit.
func TestMasterServerDefaults(t *testing.T) {
	t.Parallel()
	srv := masterHTTPServer(masterConfig{}, http.NotFoundHandler(), storetest.Discard())
	if srv.ReadTimeout != defReadTimeout || srv.WriteTimeout != defWriteTimeout || srv.IdleTimeout != defIdleTimeout ||
		srv.MaxHeaderBytes != defMaxHeaderBytes || srv.ReadHeaderTimeout != readHeaderTimeout {
		t.Fatalf("defaults: read %s write %s idle %s header %d", srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}

// TestTrustedProxiesConfig: --trusted-proxies, SM_TRUSTED_PROXIES and the
// file key take IPs and CIDRs; anything else is a configuration error.
func TestTrustedProxiesConfig(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) lookupEnvFunc {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c, _, err := parseMasterConfig(nil, env(nil))
	if err != nil || len(c.Proxies) != 0 {
		t.Fatalf("default: %v %v", c.Proxies, err)
	}
	c, _, err = parseMasterConfig([]string{"--trusted-proxies", "10.0.0.1, 192.168.0.0/16,::1"}, env(nil))
	if err != nil || strings.Join(c.Proxies, " ") != "10.0.0.1 192.168.0.0/16 ::1" {
		t.Fatalf("flag: %v %v", c.Proxies, err)
	}
	c, _, err = parseMasterConfig(nil, env(map[string]string{"SM_TRUSTED_PROXIES": "127.0.0.1"}))
	if err != nil || strings.Join(c.Proxies, " ") != "127.0.0.1" {
		t.Fatalf("env: %v %v", c.Proxies, err)
	}
	for _, bad := range []string{"proxy.example.com", "10.0.0.0/33", "1.2.3"} {
		_, _, err = parseMasterConfig([]string{"--trusted-proxies", bad}, env(nil))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "trusted-proxies") {
			t.Fatalf("%q: %v, want a config error naming the flag", bad, err)
		}
	}
}
