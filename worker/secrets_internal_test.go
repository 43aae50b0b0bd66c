package worker

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

const (
	secretTok = "tok-Sup3r/secret" // a secret param; '/' makes its escaped forms differ
	secretHdr = "hdr-value-9876"   // a marked secret header
	secretPw  = "pw-s3cret"        // the URL's password
)

// secretTask is an HTTP task to url whose secrets are a param used in the
// path, query and a header, a marked header and a URL password.
func secretTask(id, url string) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskHTTP,
		Timeout:  protocol.Duration(30 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Params:   map[string]string{"tok": secretTok, "short": "ab"}, SecretParams: []string{"tok", "short"},
		HTTP: &protocol.HTTPSpec{Method: http.MethodGet, URL: url,
			Headers:       map[string]string{"X-Hdr": secretHdr, "Authorization": "Bearer {{tok}}"},
			SecretHeaders: []string{"x-hdr"}}}, Executors: 1}
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{secretTok, "tok-Sup3r%2Fsecret", secretHdr, secretPw} {
		if strings.Contains(s, v) {
			t.Fatalf("%s shows the secret %q: %q", what, v, s)
		}
	}
}

func TestSecretValuesAreMaskedInLiveLineOutputAndErrors(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, 50*time.Millisecond)

	// The live line of a running request whose path holds the secret param.
	slow := newSlowTarget(t)
	defer slow.open()
	u := strings.Replace(slow.srv.URL, "http://", "http://user:"+secretPw+"@", 1)
	r.runOnce(secretTask("live", u+"/p/{{tok}}?q={{tok}}"), nil)
	id := onlyLiveRun(t, r)
	p, ok := r.live.progress(id)
	if !ok || !strings.Contains(p.Waiting, "/p/"+protocol.SecretMask) {
		t.Fatalf("waiting = %q, want the path with the mask", p.Waiting)
	}
	assertNoSecret(t, "the live line", p.Waiting)
	r.live.kill(id, "test")
	finalReport(t, sink, id)

	// A failed run whose answer echoes every header and the URL.
	echo := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		rw.WriteHeader(http.StatusInternalServerError)
		_ = req.Header.Write(rw)
		_, _ = io.WriteString(rw, "url="+req.URL.String()+" raw="+req.URL.RawQuery)
	}))
	defer echo.Close()
	u = strings.Replace(echo.URL, "http://", "http://user:"+secretPw+"@", 1)
	r.runOnce(secretTask("echo", u+"/p/{{tok}}?q={{tok}}&pw="+secretPw), nil)
	var got protocol.RunReport
	waitFor(t, "the echo run", func() bool {
		for _, rep := range sink.all() {
			if rep.TaskID == "echo" && rep.Result != protocol.ResultRunning {
				got = rep
				return true
			}
		}
		return false
	})
	if got.Result != protocol.ResultFailed || !strings.Contains(got.Output, protocol.SecretMask) {
		t.Fatalf("echo run = %s %q, want failed with masks", got.Result, got.Output)
	}
	assertNoSecret(t, "the output of a failed run", got.Output)
	if !strings.Contains(got.Output, "X-Hdr") {
		t.Fatalf("output %q lost its text around the masks", got.Output)
	}

	// The HTTP client's error quotes the URL, query and all.
	r.runOnce(secretTask("down", "http://127.0.0.1:1/x?key={{tok}}"), nil)
	waitFor(t, "the unreachable run", func() bool {
		for _, rep := range sink.all() {
			if rep.TaskID == "down" && rep.Result != protocol.ResultRunning {
				got = rep
				return true
			}
		}
		return false
	})
	if !strings.Contains(got.Output, "request failed") || !strings.Contains(got.Output, "key="+protocol.SecretMask) {
		t.Fatalf("unreachable run output %q: want the client's error with the mask", got.Output)
	}
	assertNoSecret(t, "the client's error", got.Output)
}

func TestShellOutputMasksAValueSplitAcrossWrites(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, 50*time.Millisecond)
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "sh", Title: "t", Type: protocol.TaskShell,
		Timeout:  protocol.Duration(30 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Params:   map[string]string{"tok": secretTok}, SecretParams: []string{"tok"},
		// The value is printed in two writes, then the run waits to be read live.
		Shell: &protocol.ShellSpec{Command: `printf 'a=tok-Sup3r'; sleep 0.2; printf '/secret b=%s\n' "$tok"; sleep 30`}},
		Executors: 1}
	r.runOnce(spec, nil)
	id := onlyLiveRun(t, r)
	var p protocol.RunProgress
	waitFor(t, "the whole line in the live output", func() bool {
		p, _ = r.live.progress(id)
		return strings.Contains(p.Output, "b=")
	})
	if want := "a=" + protocol.SecretMask + " b=" + protocol.SecretMask; !strings.Contains(p.Output, want) {
		t.Fatalf("live output %q, want %q", p.Output, want)
	}
	r.live.kill(id, "test")
	final := finalReport(t, sink, id)
	assertNoSecret(t, "the shell's final output", final.Output)
	if !strings.Contains(final.Output, "a="+protocol.SecretMask) {
		t.Fatalf("final output %q", final.Output)
	}
}

// seen records the headers each path of a target received.
type seen struct {
	mu  sync.Mutex
	got map[string]http.Header
}

func (s *seen) record(req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = map[string]http.Header{}
	}
	s.got[req.URL.Path] = req.Header.Clone()
}

func (s *seen) header(path string) (http.Header, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.got[path]
	return h, ok
}

func TestRedirectToAnotherPortDropsCredentials(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, 50*time.Millisecond)
	r.http = &http.Client{CheckRedirect: checkRedirect}

	var other, home seen
	b := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		other.record(req)
		rw.WriteHeader(http.StatusOK)
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		home.record(req)
		switch req.URL.Path {
		case "/cross":
			http.Redirect(rw, req, b.URL+"/landed", http.StatusFound)
		case "/cross307":
			http.Redirect(rw, req, b.URL+"/landed307", http.StatusTemporaryRedirect)
		case "/same":
			http.Redirect(rw, req, "/landed", http.StatusFound)
		default:
			rw.WriteHeader(http.StatusOK)
		}
	}))
	defer a.Close()

	run := func(id, url string, edit func(*protocol.TaskSpec)) protocol.RunReport {
		t.Helper()
		spec := secretTask(id, url)
		spec.HTTP.Headers["Cookie"] = "c=cookie-value"
		spec.HTTP.Headers["X-Api-Key"] = "api-key-value"
		spec.HTTP.Headers["X-Plain"] = "plain-value"
		spec.HTTP.Headers["X-Uses"] = "t={{tok}}"
		if edit != nil {
			edit(&spec)
		}
		r.runOnce(spec, nil)
		var got protocol.RunReport
		waitFor(t, "run "+id, func() bool {
			for _, rep := range sink.all() {
				if rep.TaskID == id && rep.Result != protocol.ResultRunning {
					got = rep
					return true
				}
			}
			return false
		})
		return got
	}
	secretHeaders := []string{"Authorization", "Cookie", "X-Api-Key", "X-Hdr", "X-Uses", "Referer"}

	// A static task (prepared request) and one built per run.
	for _, tc := range []struct {
		id   string
		edit func(*protocol.TaskSpec)
	}{{"static", func(s *protocol.TaskSpec) {
		delete(s.HTTP.Headers, "X-Uses")
		s.HTTP.Headers["Authorization"] = "Bearer static-token"
	}}, {"expanded", nil}} {
		other.mu.Lock()
		other.got = nil
		other.mu.Unlock()
		if rep := run(tc.id+"-cross", a.URL+"/cross?q={{tok}}", tc.edit); rep.Result != protocol.ResultSuccess {
			t.Fatalf("%s: cross redirect run = %s %q", tc.id, rep.Result, rep.Output)
		}
		h, ok := other.header("/landed")
		if !ok {
			t.Fatalf("%s: the other port was not called", tc.id)
		}
		for _, name := range secretHeaders {
			if v := h.Get(name); v != "" {
				t.Fatalf("%s: the other port received %s: %q", tc.id, name, v)
			}
		}
		if h.Get("X-Plain") != "plain-value" {
			t.Fatalf("%s: a plain header did not follow: %v", tc.id, h)
		}
	}

	// A redirect on the same host keeps every header.
	if rep := run("same", a.URL+"/same", nil); rep.Result != protocol.ResultSuccess {
		t.Fatalf("same-host redirect run = %s %q", rep.Result, rep.Output)
	}
	h, ok := home.header("/landed")
	if !ok || h.Get("Authorization") != "Bearer "+secretTok || h.Get("X-Hdr") != secretHdr || h.Get("X-Api-Key") != "api-key-value" {
		t.Fatalf("same-host redirect lost credentials: %v", h)
	}

	// A 307 would send a body holding a secret param to the other port.
	rep := run("body", a.URL+"/cross307", func(s *protocol.TaskSpec) {
		s.HTTP.Method = http.MethodPost
		s.HTTP.Body = `{"tok":"{{tok}}"}`
	})
	if rep.Result != protocol.ResultFailed || !strings.Contains(rep.Output, "not following the redirect") {
		t.Fatalf("307 with a secret body = %s %q, want refused", rep.Result, rep.Output)
	}
	if _, ok := other.header("/landed307"); ok {
		t.Fatal("the body with a secret param followed a 307 to another port")
	}
}

func TestScrubberIgnoresShortValuesAndMasksEscapedForms(t *testing.T) {
	t.Parallel()
	d := protocol.TaskDef{Params: map[string]string{"a": "abc", "b": "x y/z+w"}, SecretParams: []string{"a", "b"}}
	s := protocol.NewScrubber(&d)
	got := s.Scrub("abc x y/z+w x+y%2Fz%2Bw x%20y%2Fz+w")
	want := "abc " + strings.Repeat(protocol.SecretMask+" ", 2) + protocol.SecretMask
	if got != want {
		t.Fatalf("Scrub = %q, want %q", got, want)
	}
	if protocol.NewScrubber(&protocol.TaskDef{Params: map[string]string{"a": "abc"}, SecretParams: []string{"a"}}) != nil {
		t.Fatal("a task whose only secret is shorter than MinScrubLen has a scrubber")
	}
}

func TestScrubberMasksBasicAuthPasswordsAndBearerTokens(t *testing.T) {
	t.Parallel()
	d := protocol.TaskDef{HTTP: &protocol.HTTPSpec{URL: "http://x/", Headers: map[string]string{
		"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:basic-pw-1")), "X-Api-Key": "Token key-22"}}}
	got := protocol.NewScrubber(&d).Scrub("pw=basic-pw-1 key=key-22 user=bob")
	if want := "pw=" + protocol.SecretMask + " key=" + protocol.SecretMask + " user=bob"; got != want {
		t.Fatalf("Scrub = %q, want %q", got, want)
	}
}

// A value whose start was cut off with the output's beginning leaves no end
// visible: the bytes at the cut that may hold it are dropped too.
func TestTailBufferCutLeavesNoEndOfASecret(t *testing.T) {
	t.Parallel()
	sc := protocol.NewScrubber(&protocol.TaskDef{Params: map[string]string{"p": "secret-value-1"}, SecretParams: []string{"p"}})
	b := &tailBuffer{max: 12, scrub: sc}
	_, _ = b.Write([]byte("zzzzzz" + "secret-value-1" + "tail"))
	if got := b.String(); strings.Contains(got, "value-1") || !strings.Contains(got, "earlier bytes truncated") {
		t.Fatalf("output %q shows the end of a cut secret", got)
	}
	// Whole values in the kept part are masked, across writes.
	b = &tailBuffer{max: 64, scrub: sc}
	for _, w := range []string{"a secret-", "val", "ue-1 b"} {
		_, _ = b.Write([]byte(w))
	}
	if got := b.String(); got != "a "+protocol.SecretMask+" b" {
		t.Fatalf("output %q", got)
	}
}
