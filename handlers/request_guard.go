package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/schedulemaster-go/schedulemaster/master"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Body limits, enforced before anything parses a body.
const (
	// maxFormBody bounds form posts (login, settings, users, nodes): the
	// largest of them is a few KiB.
	maxFormBody = 256 << 10
	// maxTaskBody bounds task definitions, as JSON or as the console form: it
	// fits a task with a large HTTP body and many params.
	maxTaskBody = maxBody
	// maxBulkBody bounds a bulk request (POST /api/v1/tasks/bulk,
	// /api/v1/delayed/batch): up to master.MaxBulkTasks tasks of a few KiB.
	maxBulkBody = 64 << 20
	// maxOtherJSONBody bounds the other open API bodies (users, nodes).
	maxOtherJSONBody = 256 << 10
)

// badTextMsg is the field error of text that holds NUL or invalid UTF-8.
const badTextMsg = "holds a NUL byte or invalid UTF-8; nothing was changed"

// guardText checks the text of a console or open API request before its
// handler runs: NUL bytes or invalid UTF-8 in the path, the path parameters or
// the query are a 400 naming the field. The cluster API workers call has its
// own per-run validation and is not behind it.
func (s *server) guardText(c *gin.Context) {
	req := c.Request
	if !validText(req.URL.Path) {
		s.badText(c, "path")
		return
	}
	for _, p := range c.Params {
		if !validText(p.Value) {
			s.badText(c, p.Key)
			return
		}
	}
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil {
		s.badInput(c, http.StatusBadRequest, "query", "is not valid URL encoding")
		return
	}
	if field, ok := badValues(q); ok {
		s.badText(c, field)
		return
	}
	c.Next()
}

// guardBody bounds and checks the body of the requests of one route group:
// multipart bodies are refused (no form needs them); the body gets the
// group's limit, checked on Content-Length first and then while reading; a
// URL-encoded form is parsed and a JSON body read, and NUL bytes or invalid
// UTF-8 in a form field or a JSON string are a 400 naming the field.
func (s *server) guardBody(limit int64) gin.HandlerFunc {
	tooLarge := "is larger than " + strconv.FormatInt(limit>>10, 10) + " KiB"
	return func(c *gin.Context) {
		req := c.Request
		if req.Body == nil || req.Body == http.NoBody || (req.ContentLength == 0 && req.Method == http.MethodGet) {
			c.Next()
			return
		}
		mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		if strings.HasPrefix(mt, "multipart/") {
			// Refused unread: net/http would otherwise buffer the parts to
			// memory or disk before a handler could say no.
			s.badInput(c, http.StatusUnsupportedMediaType, "body", "multipart bodies are not accepted; send a URL-encoded form or JSON")
			return
		}
		if req.ContentLength > limit {
			s.badInput(c, http.StatusRequestEntityTooLarge, "body", tooLarge)
			return
		}
		req.Body = http.MaxBytesReader(c.Writer, req.Body, limit)
		// The API speaks JSON: a body sent the way curl -d sends it (as a
		// form) or with no type is taken as JSON when it is JSON, and
		// refused with the header to send when it is not.
		if wantsJSON(c) && (mt == "" || mt == "application/x-www-form-urlencoded" || mt == "text/plain") {
			body, err := io.ReadAll(req.Body)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					s.badInput(c, http.StatusRequestEntityTooLarge, "body", tooLarge)
					return
				}
				s.badInput(c, http.StatusBadRequest, "body", "could not be read")
				return
			}
			if t := bytes.TrimSpace(body); len(t) > 0 && !json.Valid(t) {
				s.badInput(c, http.StatusUnsupportedMediaType, "body", "is not JSON: the API takes JSON bodies; send one with the header Content-Type: application/json")
				return
			}
			mt = "application/json"
			req.Header.Set("Content-Type", mt)
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		switch {
		case mt == "application/x-www-form-urlencoded":
			if err := req.ParseForm(); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					s.badInput(c, http.StatusRequestEntityTooLarge, "body", tooLarge)
					return
				}
				s.badInput(c, http.StatusBadRequest, "body", "is not a valid URL-encoded form")
				return
			}
			if field, ok := badValues(req.PostForm); ok {
				s.badText(c, field)
				return
			}
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			body, err := io.ReadAll(req.Body)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					s.badInput(c, http.StatusRequestEntityTooLarge, "body", tooLarge)
					return
				}
				s.badInput(c, http.StatusBadRequest, "body", "could not be read")
				return
			}
			if field, ok := badJSONString(body); ok {
				s.badText(c, field)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		c.Next()
	}
}

// crossOrigin refuses unsafe cross-origin browser requests (a page of another
// site posting with the user's session cookie) before anything else runs:
// the console's and the open API's CSRF protection. Scripts and workers,
// which send no browser fetch metadata, pass.
func (s *server) crossOrigin(cop *http.CrossOriginProtection) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := cop.Check(c.Request); err != nil {
			if wantsJSON(c) {
				c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "cross-origin request refused"})
				return
			}
			s.errorPage(c, http.StatusForbidden, tr(c, "ErrCrossSite"))
			return
		}
		c.Next()
	}
}

// postForm is the request's URL-encoded form, parsed by guardBody (an
// empty one for a request without a form).
func postForm(c *gin.Context) url.Values {
	if c.Request.PostForm == nil {
		_ = c.Request.ParseForm() // a GET or a bodiless POST: nothing to read
	}
	return c.Request.PostForm
}

// validText reports whether s is valid UTF-8 without NUL.
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// badValues returns the first (by name) key whose name or values are not
// valid text.
func badValues(v url.Values) (string, bool) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !validText(k) {
			return "field name", true
		}
		for _, x := range v[k] {
			if !validText(x) {
				return k, true
			}
		}
	}
	return "", false
}

// badJSONString walks a JSON body's tokens and returns the path (e.g.
// "http.headers.X-A", "executors[1]") of the first key or string that holds
// NUL or invalid UTF-8. encoding/json would turn invalid bytes into U+FFFD
// silently, so each string's raw bytes are checked too. A body that is not
// JSON is left to the handler, which says so.
func badJSONString(body []byte) (string, bool) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u0000`)) {
		return "", false // the common case: nothing to look for
	}
	type frame struct {
		obj     bool
		wantKey bool
		key     string
		idx     int
	}
	var stack []frame
	path := func(last string) string {
		var b strings.Builder
		for i, f := range stack {
			seg := f.key
			if i == len(stack)-1 && last != "" {
				seg = last
			}
			switch {
			case f.obj && b.Len() > 0:
				b.WriteString("." + seg)
			case f.obj:
				b.WriteString(seg)
			default:
				b.WriteString("[" + strconv.Itoa(f.idx) + "]")
			}
		}
		if b.Len() == 0 {
			return "body"
		}
		return b.String()
	}
	afterValue := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			if !utf8.Valid(body) {
				return "body", true // invalid bytes outside any string
			}
			return "", false
		}
		raw := body[start:dec.InputOffset()]
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{obj: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			bad := !utf8.Valid(raw) || strings.ContainsRune(v, 0)
			if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
				if bad {
					return path(v), true
				}
				stack[n-1].key, stack[n-1].wantKey = v, false
				continue
			}
			if bad {
				return path(""), true
			}
			afterValue()
		default:
			afterValue()
		}
		if len(stack) == 0 && !dec.More() {
			return "", false
		}
	}
}

// badText answers a field that holds NUL or invalid UTF-8.
func (s *server) badText(c *gin.Context, field string) {
	s.badInput(c, http.StatusBadRequest, field, badTextMsg)
}

// badInput refuses a request before its handler runs: JSON with a field error
// on the API, an error page naming the field in the console.
func (s *server) badInput(c *gin.Context, status int, field, msg string) {
	// A bad key names itself: keep its name printable.
	field = strings.ReplaceAll(strings.ToValidUTF8(field, "\uFFFD"), "\x00", "\uFFFD")
	if wantsJSON(c) {
		c.AbortWithStatusJSON(status, gin.H{"error": field + ": " + msg, "fields": protocol.FieldErrors{field: msg}})
		return
	}
	s.errorPage(c, status, tr(c, "ErrField", "Field", field, "Msg", views.Refusal(c.Request.Context(), msg)))
}

// maxLargeBodies is how many bodies larger than maxBody (or of no stated
// length) are read and decoded at once; each may take tens of MB.
const maxLargeBodies = 2

// fewLargeBodies lets at most maxLargeBodies large bodies in at once; the
// rest are answered 503 with Retry-After before they are read.
func (s *server) fewLargeBodies(c *gin.Context) {
	if n := c.Request.ContentLength; n >= 0 && n <= maxBody {
		c.Next()
		return
	}
	select {
	case s.largeBodies <- struct{}{}:
		defer func() { <-s.largeBodies }()
		c.Next()
	default:
		c.Header("Retry-After", "2")
		c.AbortWithStatusJSON(http.StatusServiceUnavailable, protocol.ErrorResponse{
			Error: "the master is reading other large requests: retry in a moment"})
	}
}

// requireAnywhere refuses, before its body is read, the request of one who
// may do a in no project (the engine's rule, Principal.CanAnywhere): a
// viewer's bulk save or apply never costs the master its decoding. The
// engine still authorizes each object the body names.
func (s *server) requireAnywhere(a master.Action) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p := currentUser(c); p != nil && p.CanAnywhere(a) {
			c.Next()
			return
		}
		s.forbidden(c, "forbidden: your roles may not "+string(a)+" in any project")
	}
}
