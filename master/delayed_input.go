// Delayed task input: what another application (or an admin in the
// console) submits, and its validation.

package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Limits of delayed task input.
const (
	// MaxDelay is the furthest in the future a delayed task may be due.
	MaxDelay = 366 * 24 * time.Hour
	// MaxDelayedBody bounds notify_body.
	MaxDelayedBody = 64 << 10
	// maxDelayedURL bounds notify_url (its column).
	maxDelayedURL = 2048
	// maxDelayedContentType bounds content_type (its column).
	maxDelayedContentType = 128
	// delayedPastSlack is how far in the past an "at" may lie: the caller's
	// clock and the network make "now" arrive a little late.
	delayedPastSlack = time.Minute
)

// Content types a delayed task's callback may carry.
const (
	ContentJSON = "application/json"
	ContentForm = "application/x-www-form-urlencoded"
)

// DelayedInput is a delayed task as a caller submits it (SPEC section 5):
// exactly one of Delay (a Go duration string like "30m", or a number of
// seconds) and At (RFC 3339).
type DelayedInput struct {
	SourceApp  string          `json:"source_app"`
	Topic      string          `json:"topic"`
	ContentKey string          `json:"content_key"`
	Delay      json.RawMessage `json:"delay,omitempty"`
	At         string          `json:"at,omitempty"`
	// Project names the project the delayed task belongs to ("": default).
	Project     string   `json:"project,omitempty"`
	NotifyURL   string   `json:"notify_url"`
	NotifyBody  string   `json:"notify_body"`
	ContentType string   `json:"content_type"`
	Retries     int      `json:"retries"`
	Executors   []string `json:"executors"`
	// Selector is a label selector: the running workers it selects when
	// the task is due may run it too (with Executors: the union).
	Selector string   `json:"selector"`
	Keepers  []string `json:"keepers"`
}

// checkDelayedInput validates every field of in against now, the nodes and
// the users, and builds the row to store. All field errors come together.
func (svc *DelayedTasks) checkDelayedInput(ctx context.Context, in *DelayedInput, now time.Time, project *Project) (*store.DelayedTask, error) {
	fe := protocol.FieldErrors{}
	pools := poolRuleOf(project)
	in.SourceApp = strings.TrimSpace(in.SourceApp)
	in.Topic = strings.TrimSpace(in.Topic)
	in.ContentKey = strings.TrimSpace(in.ContentKey)
	checkName(fe, "source_app", in.SourceApp, store.MaxDelayedSourceApp)
	checkName(fe, "topic", in.Topic, store.MaxDelayedTopic)
	checkName(fe, "content_key", in.ContentKey, store.MaxDelayedContentKey)

	due := delayedDue(fe, in, now)

	in.NotifyURL = strings.TrimSpace(in.NotifyURL)
	if msg := checkNotifyURL(in.NotifyURL); msg != "" {
		fe["notify_url"] = msg
	}
	in.ContentType = strings.TrimSpace(in.ContentType)
	if in.ContentType == "" {
		in.ContentType = ContentJSON
	}
	media, msg := checkContentType(in.ContentType)
	if msg != "" {
		fe["content_type"] = msg
	}
	switch {
	case len(in.NotifyBody) > MaxDelayedBody:
		fe["notify_body"] = fmt.Sprintf("is larger than %d KiB", MaxDelayedBody>>10)
	case !utf8.ValidString(in.NotifyBody) || strings.ContainsRune(in.NotifyBody, 0):
		fe["notify_body"] = "holds a NUL byte or invalid UTF-8"
	case in.NotifyBody == "" || msg != "":
	case media == ContentJSON && !json.Valid([]byte(in.NotifyBody)):
		fe["notify_body"] = "is not valid JSON (content_type is " + ContentJSON + ")"
	case media == ContentForm:
		if _, err := url.ParseQuery(in.NotifyBody); err != nil {
			fe["notify_body"] = "is not a valid URL-encoded form (content_type is " + ContentForm + ")"
		}
	}
	if in.Retries < 0 || in.Retries > protocol.MaxRetries {
		fe["retries"] = fmt.Sprintf("must be from 0 to %d", protocol.MaxRetries)
	}

	if sel, err := canonicalSelector(in.Selector); err != nil {
		fe["selector"] = err.Error()
	} else {
		in.Selector = sel
	}
	in.Executors = dedupe(in.Executors)
	if len(in.Executors) > 100 {
		fe["executors"] = "at most 100 executors"
	} else if len(in.Executors) > 0 {
		nodes, err := store.ListNodes(ctx, svc.db)
		if err != nil {
			return nil, err
		}
		byName := map[string]store.Node{}
		for _, n := range nodes {
			byName[n.Name] = n
		}
		for _, e := range in.Executors {
			n, ok := byName[e]
			switch {
			case !ok:
				fe["executors"] = fmt.Sprintf("unknown node %q", printable(e))
			case n.Type != store.TypeWorker:
				fe["executors"] = fmt.Sprintf("%q is a master, not a worker", e)
			}
		}
		pools.check(fe, in.Selector, in.Executors, byName)
	} else if !pools.all {
		pools.check(fe, in.Selector, nil, nil)
		if in.Selector == "" {
			fe["selector"] = fmt.Sprintf("project %s may run only on %s: give a selector within them, or executors", pools.project, pools.names())
		}
	}
	in.Keepers = dedupe(in.Keepers)
	if len(in.Keepers) > 100 {
		fe["keepers"] = "at most 100 keepers"
	} else {
		for _, k := range in.Keepers {
			ok, err := keeperReads(ctx, svc.db, k, project.ID)
			if err != nil {
				return nil, err
			}
			if !ok {
				fe["keepers"] = keeperRefusal(k)
			}
		}
	}
	if len(fe) > 0 {
		return nil, fe
	}
	executors, _ := json.Marshal(in.Executors)
	keepers, _ := json.Marshal(in.Keepers)
	row := &store.DelayedTask{
		ID: newDelayedID(), SourceApp: in.SourceApp, Topic: in.Topic, ContentKey: in.ContentKey,
		DueAt: due, NextAt: due, NotifyURL: in.NotifyURL, NotifyBody: in.NotifyBody, ContentType: in.ContentType,
		Retries: in.Retries, Executors: string(executors), Selector: in.Selector, Keepers: string(keepers),
		ProjectID: project.ID,
	}
	// What a worker will be sent must pass its validation: check it now, so
	// that a task accepted here can always be sent.
	spec := delayedSpec(row, 1, 1, protocol.DefaultTimeout, now)
	if err := spec.Validate(now); err != nil {
		var sfe protocol.FieldErrors
		if errors.As(err, &sfe) {
			for k, v := range sfe {
				switch k {
				case "http.url":
					fe["notify_url"] = v
				case "http.body":
					fe["notify_body"] = v
				case "http.content_type":
					fe["content_type"] = v
				case "http.headers":
					fe["content_key"] = "cannot be sent as a header: " + v
				default:
					fe[k] = v
				}
			}
			return nil, fe
		}
		return nil, err
	}
	return row, nil
}

// checkName validates source_app, topic and content_key: required, bounded,
// printable (they are sent to the callback as headers).
func checkName(fe protocol.FieldErrors, field, v string, max int) {
	switch {
	case v == "":
		fe[field] = "is required"
	case len(v) > max:
		fe[field] = fmt.Sprintf("is longer than %d bytes", max)
	case !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0:
		fe[field] = "holds a control character (line break, tab, NUL) or invalid UTF-8"
	}
}

// delayedDue reads the due time from exactly one of delay and at.
func delayedDue(fe protocol.FieldErrors, in *DelayedInput, now time.Time) time.Time {
	raw := bytes.TrimSpace(in.Delay)
	hasDelay := len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
	in.At = strings.TrimSpace(in.At)
	hasAt := in.At != ""
	switch {
	case hasDelay && hasAt:
		fe["delay"] = "give either delay or at, not both"
		fe["at"] = "give either delay or at, not both"
		return time.Time{}
	case !hasDelay && !hasAt:
		fe["delay"] = `is required unless at is given: a duration like "30m" or a number of seconds`
		return time.Time{}
	case hasAt:
		at, err := time.Parse(time.RFC3339Nano, in.At)
		switch {
		case err != nil:
			fe["at"] = fmt.Sprintf("%q is not an RFC 3339 time like 2026-05-01T12:00:00Z", printable(in.At))
		case at.Before(now.Add(-delayedPastSlack)):
			fe["at"] = "is in the past"
		case at.After(now.Add(MaxDelay)):
			fe["at"] = fmt.Sprintf("is more than %d days ahead", int(MaxDelay/(24*time.Hour)))
		default:
			return at.UTC()
		}
		return time.Time{}
	}
	d, msg := parseDelay(raw)
	if msg != "" {
		fe["delay"] = msg
		return time.Time{}
	}
	return now.Add(d).UTC()
}

// parseDelay reads a delay: a JSON string holding a Go duration ("90s",
// "1h30m") or a number of seconds, or a JSON number of seconds.
func parseDelay(raw []byte) (time.Duration, string) {
	const want = `must be a duration like "30m" or a number of seconds`
	var secs float64
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, want
		}
		s = strings.TrimSpace(s)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			secs = f
			break
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Sprintf("%q is not a duration like \"30m\" or a number of seconds", printable(s))
		}
		return checkDelay(d)
	default:
		if err := json.Unmarshal(raw, &secs); err != nil {
			return 0, want
		}
	}
	if secs != secs || secs > MaxDelay.Seconds() || secs < -MaxDelay.Seconds() { // NaN, or out of range
		return 0, fmt.Sprintf("must be more than 0 and at most %d days", int(MaxDelay/(24*time.Hour)))
	}
	return checkDelay(time.Duration(secs * float64(time.Second)))
}

func checkDelay(d time.Duration) (time.Duration, string) {
	if d <= 0 || d > MaxDelay {
		return 0, fmt.Sprintf("must be more than 0 and at most %d days", int(MaxDelay/(24*time.Hour)))
	}
	return d, ""
}

// checkNotifyURL requires an absolute http(s) URL that a worker can call.
func checkNotifyURL(s string) string {
	if s == "" {
		return "is required"
	}
	if len(s) > maxDelayedURL {
		return fmt.Sprintf("is longer than %d characters", maxDelayedURL)
	}
	if strings.ContainsAny(s, " \t\r\n\x00") {
		return "holds a space, line break or NUL"
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an absolute http(s) URL", printable(s))
	}
	return ""
}

// checkContentType accepts the two content types a callback may carry (with
// parameters such as charset) and returns the media type.
func checkContentType(s string) (string, string) {
	if len(s) > maxDelayedContentType {
		return "", fmt.Sprintf("is longer than %d characters", maxDelayedContentType)
	}
	media, _, err := mime.ParseMediaType(s)
	if err != nil || (media != ContentJSON && media != ContentForm) {
		return "", fmt.Sprintf("%q is not %s or %s", printable(s), ContentJSON, ContentForm)
	}
	return media, ""
}
