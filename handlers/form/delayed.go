package form

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Delayed reads the delayed task form: the values as typed and the engine's
// input. Nothing here refuses: the engine names every bad field at once.
func Delayed(v url.Values) (views.DelayedFields, master.DelayedInput) {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.DelayedFields{
		SourceApp: v.Get("source_app"), Topic: v.Get("topic"), ContentKey: v.Get("content_key"),
		Delay: trim("delay"), At: trim("at"), NotifyURL: v.Get("notify_url"), ContentType: trim("content_type"),
		NotifyBody: v.Get("notify_body"), Retries: trim("retries"), Keepers: v.Get("keepers"),
		Selector: v.Get("selector"),
	}
	in := master.DelayedInput{
		SourceApp: f.SourceApp, Topic: f.Topic, ContentKey: f.ContentKey, At: timeUTC(f.At),
		NotifyURL: f.NotifyURL, NotifyBody: f.NotifyBody, ContentType: f.ContentType,
		Executors: v["executors"], Selector: f.Selector, Keepers: List(f.Keepers),
	}
	if f.Delay != "" {
		in.Delay, _ = json.Marshal(f.Delay)
	}
	if f.Retries != "" {
		if err := json.Unmarshal([]byte(f.Retries), &in.Retries); err != nil {
			in.Retries = -1 // refused by the engine with the other fields' errors, nothing made
		}
	}
	return f, in
}

// timeUTC turns a datetime-local value (read as UTC) into RFC 3339; anything
// else is passed on as typed, for the engine to name.
func timeUTC(v string) string {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.Format(time.RFC3339)
		}
	}
	return v
}
