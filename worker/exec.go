package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// copyBufs pools the buffers that read answers: io.Copy would allocate 32 KiB
// per run, which at a thousand runs a second is most of the worker's garbage.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// outcome is what one execution produced.
type outcome struct {
	result     protocol.Result
	httpStatus int
	exitCode   *int
	output     string
	binary     bool // output had NUL or invalid UTF-8 bytes, replaced
}

// taskPrep is what a task's runs share, worked out once per task: its HTTP
// request when it is the same at every fire (no {{placeholder}} in its URL,
// body or header values), so that a fire costs a shallow copy instead of
// parsing the URL and building the headers again, and its scrubber, which
// masks its secret values in everything a run shows. The header map is
// shared by every request made from it; neither http.Client nor
// http.Transport modifies a request's headers (a client that must, for a
// redirect or a cookie, works on a copy).
type taskPrep struct {
	proto *http.Request // never sent: its context is Background; nil: built per run
	scrub *protocol.Scrubber
	// redirect is what must not follow a redirect to another host, beyond
	// the always-secret headers; nil when nothing.
	redirect *redirectGuard
}

// redirectGuard names a task's secrets that a redirect to another scheme,
// host or port must not carry (see checkRedirect).
type redirectGuard struct {
	headers    []string // secret headers, or headers using a secret param
	bodySecret bool     // the body uses a secret param
}

// prepareTask prepares the runs of def, or returns nil when there is nothing
// to share (the request is built at each run and nothing is secret).
func prepareTask(spec *protocol.TaskSpec) *taskPrep {
	def := &spec.TaskDef
	var extra []string
	if c := spec.Connection; c != nil && c.Secret != "" {
		extra = append(extra, c.Secret)
	}
	p := &taskPrep{scrub: protocol.NewScrubber(def, extra...)}
	if def.Type == protocol.TaskHTTP && def.HTTP != nil {
		g := &redirectGuard{headers: protocol.SecretHeaderNames(def), bodySecret: protocol.UsesSecretParam(def.HTTP.Body, def)}
		if len(g.headers) > 0 || g.bodySecret {
			p.redirect = g
		}
		p.proto = newHTTPTemplate(def)
	}
	if p.proto == nil && p.scrub == nil && p.redirect == nil {
		return nil
	}
	return p
}

// newHTTPTemplate builds the request of def once, or returns nil when it
// must be built at each run (it expands params, or it is invalid: the run
// says why).
func newHTTPTemplate(def *protocol.TaskDef) *http.Request {
	h := def.HTTP
	if def.Type != protocol.TaskHTTP || h == nil || strings.Contains(h.URL, "{{") || strings.Contains(h.Body, "{{") {
		return nil
	}
	for _, v := range h.Headers {
		if strings.Contains(v, "{{") {
			return nil
		}
	}
	// A template only: every run sends it under its own context (WithContext
	// in the run), so Stop and the run's timeout still cancel the request.
	req, err := newHTTPRequest(context.Background(), def)
	if err != nil {
		return nil
	}
	return req
}

// request is a new request of the template, bound to ctx.
func (t *taskPrep) request(ctx context.Context) (*http.Request, error) {
	req := t.proto.WithContext(ctx)
	if t.proto.GetBody != nil {
		body, err := t.proto.GetBody()
		if err != nil {
			return nil, err
		}
		req.Body = body
	}
	return req, nil
}

// redirectKey carries a run's *redirectGuard in its request's context.
type redirectKey struct{}

// maxRedirects is how many redirects a task's request follows, as Go's
// default client.
const maxRedirects = 10

// checkRedirect is the CheckRedirect of the tasks' client. A redirect to
// another scheme, host or port than the task's URL drops Authorization,
// Cookie, Proxy-Authorization, X-Api-Key, every header the task marks
// secret or fills with a secret param, and the Referer (it quotes the
// previous URL, query and secret params included); such a redirect that
// would send again a body holding a secret param (307, 308) is refused.
// Go itself drops only some of these headers, and only for other domains.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if sameOrigin(req.URL, via[0].URL) {
		return nil
	}
	for k := range req.Header {
		if protocol.IsSecretHeader(k, nil) {
			req.Header.Del(k)
		}
	}
	req.Header.Del("Referer")
	if g, _ := req.Context().Value(redirectKey{}).(*redirectGuard); g != nil {
		for _, h := range g.headers {
			req.Header.Del(h)
		}
		if g.bodySecret && req.Body != nil && req.Body != http.NoBody {
			return fmt.Errorf("not following the redirect to %s: it would send the body, which holds a secret param, to another host", shownURL(req.URL.String()))
		}
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (the scheme's default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// newHTTPRequest builds the request of an HTTP task, params expanded.
func newHTTPRequest(ctx context.Context, def *protocol.TaskDef) (*http.Request, error) {
	h := def.HTTP
	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(protocol.ExpandParams(h.Body, def.Params))
	}
	req, err := http.NewRequestWithContext(ctx, h.Method, protocol.ExpandParams(h.URL, def.Params), body)
	if err != nil {
		return nil, err
	}
	for k, v := range h.Headers {
		req.Header.Set(k, protocol.ExpandParams(v, def.Params))
	}
	if h.ContentType != "" {
		req.Header.Set("Content-Type", h.ContentType)
	}
	req.Header.Set("User-Agent", "ScheduleMaster-Go")
	return req, nil
}

// runHTTP performs an HTTP task; success is a 2xx status. tmpl, when not nil,
// is the task's prepared request.
func runHTTP(ctx context.Context, client *http.Client, def *protocol.TaskDef, tmpl *taskPrep) outcome {
	var req *http.Request
	var err error
	if tmpl != nil && tmpl.redirect != nil {
		ctx = context.WithValue(ctx, redirectKey{}, tmpl.redirect)
	}
	if tmpl != nil && tmpl.proto != nil {
		req, err = tmpl.request(ctx)
	} else {
		req, err = newHTTPRequest(ctx, def)
	}
	if err != nil {
		return outcome{result: protocol.ResultFailed, output: "bad request: " + err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return outcome{result: protocol.ResultTimeout, output: fmt.Sprintf("no answer within the timeout of %s", time.Duration(def.Timeout))}
		}
		return outcome{result: protocol.ResultFailed, output: "request failed: " + err.Error()}
	}
	defer resp.Body.Close()
	var scrub *protocol.Scrubber
	if tmpl != nil {
		scrub = tmpl.scrub
	}
	text, binary, copyErr := readAnswer(resp.Body, scrub)
	o := outcome{httpStatus: resp.StatusCode, output: text, binary: binary}
	switch {
	case copyErr != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		o.result = protocol.ResultTimeout
		o.output += "\n[timed out while reading the answer]"
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		o.result = protocol.ResultSuccess
	default:
		o.result = protocol.ResultFailed
	}
	return o
}

// maxAnswerRead bounds how much of an answer is read; its last
// protocol.MaxOutputBytes are kept.
const maxAnswerRead = 16 << 20

// readAnswer reads an answer body into the run's output. An answer that fits
// in one pooled buffer (most do) is copied once; a longer one goes through a
// tailBuffer that keeps its end.
func readAnswer(body io.Reader, scrub *protocol.Scrubber) (text string, binary bool, err error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	n, err := io.ReadFull(body, *buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		// The whole answer, shorter than the buffer and than MaxOutputBytes.
		text, binary = protocol.SanitizeOutput(string((*buf)[:n]))
		return text, binary, nil
	}
	out := &tailBuffer{max: protocol.MaxOutputBytes, scrub: scrub}
	_, _ = out.Write((*buf)[:n])
	if err == nil {
		_, err = io.CopyBuffer(out, io.LimitReader(body, maxAnswerRead-int64(n)), *buf)
	}
	text, binary = out.Output()
	return text, binary, err
}

// runShell runs a shell task in its own process group, so a timeout or a kill
// ends the command and everything it started. Its output goes to out, which
// the run page reads while it runs; the outcome's output holds only the
// notes added after it (a timeout, a failure to start). started is told the group's id once the
// command runs, and the func it returns is called once the command ended.
func runShell(ctx context.Context, def *protocol.TaskDef, out *tailBuffer, started func(pgid int) (ended func())) outcome {
	s := def.Shell
	var cmd *exec.Cmd
	if len(s.Args) == 0 {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", protocol.ExpandParams(s.Command, def.Params))
	} else {
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = protocol.ExpandParams(a, def.Params)
		}
		cmd = exec.CommandContext(ctx, protocol.ExpandParams(s.Command, def.Params), args...)
	}
	cmd.Dir = s.Dir
	env := os.Environ()
	for k, v := range def.Params {
		env = append(env, k+"="+v)
	}
	for k, v := range s.Env {
		env = append(env, k+"="+protocol.ExpandParams(v, def.Params))
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	ownProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Start()
	if err == nil {
		ended := started(cmd.Process.Pid)
		err = cmd.Wait()
		ended()
	}
	// The command's own output stays in out; o holds only the notes added.
	var o outcome
	if cmd.ProcessState != nil {
		code := cmd.ProcessState.ExitCode()
		o.exitCode = &code
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		o.result = protocol.ResultTimeout
		o.output += fmt.Sprintf("\n[killed: timeout of %s]", time.Duration(def.Timeout))
	case err != nil:
		o.result = protocol.ResultFailed
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			o.output += "\n[could not run: " + err.Error() + "]"
		}
	default:
		o.result = protocol.ResultSuccess
	}
	return o
}
