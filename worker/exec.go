package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// copyBufs pools the buffers that read answers: io.Copy would allocate 32 KiB
// per run, which at a thousand runs a second is most of the worker's garbage.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// outcome is what one execution produced.
type outcome struct {
	result     string
	httpStatus int
	exitCode   *int
	output     string
	binary     bool // output had NUL or invalid UTF-8 bytes, replaced
}

// runHTTP performs an HTTP task; success is a 2xx status.
func runHTTP(ctx context.Context, client *http.Client, def *protocol.TaskDef) outcome {
	h := def.HTTP
	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(protocol.ExpandParams(h.Body, def.Params))
	}
	req, err := http.NewRequestWithContext(ctx, h.Method, protocol.ExpandParams(h.URL, def.Params), body)
	if err != nil {
		return outcome{result: protocol.ResultFailed, output: "bad request: " + err.Error()}
	}
	for k, v := range h.Headers {
		req.Header.Set(k, protocol.ExpandParams(v, def.Params))
	}
	if h.ContentType != "" {
		req.Header.Set("Content-Type", h.ContentType)
	}
	req.Header.Set("User-Agent", "ScheduleMaster-Go")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return outcome{result: protocol.ResultTimeout, output: fmt.Sprintf("no answer within the timeout of %s", time.Duration(def.Timeout))}
		}
		return outcome{result: protocol.ResultFailed, output: "request failed: " + err.Error()}
	}
	defer resp.Body.Close()
	out := &tailBuffer{max: protocol.MaxOutputBytes}
	buf := copyBufs.Get().(*[]byte)
	_, copyErr := io.CopyBuffer(out, io.LimitReader(resp.Body, 16<<20), *buf)
	copyBufs.Put(buf)
	text, binary := out.Output()
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

// runShell runs a shell task in its own process group, so a timeout kills the
// command and everything it started.
func runShell(ctx context.Context, def *protocol.TaskDef) outcome {
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
	out := &tailBuffer{max: protocol.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	text, binary := out.Output()
	o := outcome{output: text, binary: binary}
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
