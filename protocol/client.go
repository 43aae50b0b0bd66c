package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// What a Call was doing when it failed; see CallError.
const (
	OpRequest = "request" // building the request (a bad URL)
	OpSend    = "send"    // the peer is unreachable or the connection failed
	OpRead    = "read"    // reading the answer failed
	OpDecode  = "decode"  // the 2xx answer is not the expected JSON
)

// CallError is a Call that failed before a usable answer arrived: Op says
// at which step, Err why.
type CallError struct {
	Op  string
	Err error
}

// Error names the step and the cause.
func (e *CallError) Error() string { return e.Op + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// StatusError is a non-2xx answer: its status, and the message of its JSON
// error body (ErrorResponse), or "" when it had none.
type StatusError struct {
	Status int
	Msg    string
	// RetryAfter is the answer's Retry-After in seconds (a busy master's
	// 429), or 0.
	RetryAfter time.Duration
}

// Error reads "answered 409: message".
func (e *StatusError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("answered %d", e.Status)
	}
	return fmt.Sprintf("answered %d: %s", e.Status, e.Msg)
}

// NoRedirect is the CheckRedirect of clients that follow no redirect: the
// answer is the 3xx itself, so a called server cannot make the caller
// call, and send its credentials to, another address.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Call sends one request with an optional JSON body (nil for none) and the
// given headers, reads at most limit bytes of the answer and decodes a 2xx
// answer into out (unless out is nil). A non-2xx answer is a *StatusError;
// any other failure is a *CallError.
func Call(ctx context.Context, client *http.Client, method, url string, headers map[string]string, body []byte,
	limit int64, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return &CallError{Op: OpRequest, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return &CallError{Op: OpSend, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return &CallError{Op: OpRead, Err: err}
	}
	if resp.StatusCode/100 == 3 {
		// Only a client that follows no redirects (NoRedirect) sees one.
		return &StatusError{Status: resp.StatusCode, Msg: "a redirect, which is not followed: only the address given is called"}
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Status: resp.StatusCode}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			se.RetryAfter = time.Duration(min(secs, 3600)) * time.Second
		}
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			se.Msg = e.Error
		}
		return se
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &CallError{Op: OpDecode, Err: err}
		}
	}
	return nil
}
