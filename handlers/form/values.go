// Package form reads the console's forms, each once: the values as typed
// (shown back when the form has errors), the engine input they make, and the
// errors of the fields that do not parse. The engine checks everything else,
// the same way for the console, the API and the CLI.
package form

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// timeLayouts are what a datetime-local input sends (with or without
// seconds), and what a person might type instead.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05", time.RFC3339}

// Time reads a datetime-local value as UTC; "" is no time.
func Time(v string) (*time.Time, error) { return TimeIn(v, time.UTC) }

// TimeIn reads a datetime-local value as a wall clock time in loc (the
// task's time zone); "" is no time.
func TimeIn(v string, loc *time.Location) (*time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%q is not a date and time like 2030-01-02T15:04 (%s)", v, loc)
}

// FormatTimeIn writes a time for a datetime-local input, in loc.
func FormatTimeIn(t *time.Time, loc *time.Location) string {
	if t == nil {
		return ""
	}
	u := t.In(loc)
	if u.Second() != 0 {
		return u.Format("2006-01-02T15:04:05")
	}
	return u.Format("2006-01-02T15:04")
}

// Pairs reads one "key<sep>value" per line; blank lines are skipped.
func Pairs(text, sep string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d has no '%s'", i+1, sep)
		case k == "":
			return nil, fmt.Errorf("line %d has nothing before '%s'", i+1, sep)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d repeats %q", i+1, k)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// JoinPairs writes what Pairs reads, sorted by key.
func JoinPairs(m map[string]string, sep string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		lines = append(lines, k+sep+m[k])
	}
	return strings.Join(lines, "\n")
}

// Lines returns the non-blank lines of a textarea, trimmed.
func Lines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// List reads "a, b, c".
func List(text string) []string {
	var out []string
	for _, v := range strings.Split(text, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// duration writes a duration the way the forms show them (1m, not 1m0s).
func duration(d time.Duration) string { return views.ShortDuration(d) }
