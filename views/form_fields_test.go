package views

import (
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
)

// TestFormSpecAttrs: a bad field is aria-invalid and described by its
// message (and its hints); only the first bad one in page order takes the
// focus; a group of checkboxes is marked with data- attributes instead; a
// good field keeps only its hints.
func TestFormSpecAttrs(t *testing.T) {
	spec := FormSpec{
		{Name: "title", ID: "title"},
		{Name: "schedule.cron", ID: "schedule-cron"},
		{Name: "executors", ID: "executors", Group: true},
		{Name: "pools", ID: "project-pools", ErrID: "error-project-pools"},
	}
	errs := map[string]string{"schedule.cron": "minute 61 is outside 0-59", "executors": "unknown node \"x\"", "pools": "at most 32 pools"}
	check := func(got templ.Attributes, want map[string]any) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("attributes %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("attributes %v, want %v", got, want)
			}
		}
	}
	check(spec.Attrs(errs, "title", "hint-title"), map[string]any{"aria-describedby": "hint-title"})
	check(spec.Attrs(errs, "schedule.cron", "hint-cron"), map[string]any{"aria-invalid": "true", "aria-describedby": "error-schedule-cron hint-cron", "autofocus": true})
	check(spec.Attrs(errs, "executors"), map[string]any{"data-invalid": "true", "aria-describedby": "error-executors"})
	check(spec.Attrs(errs, "pools"), map[string]any{"aria-invalid": "true", "aria-describedby": "error-project-pools"})
	// The group first: its first box takes the focus (console.js).
	check(spec.Attrs(map[string]string{"executors": "x"}, "executors"), map[string]any{"data-invalid": "true", "data-focus-first": "true", "aria-describedby": "error-executors"})
	if FocusFirst(errs) != nil || FocusFirst(nil)["autofocus"] != true {
		t.Fatal("FocusFirst: autofocus only on a form without errors")
	}
	links := spec.summaryLinks(context.Background(), errs, []string{"key: is taken"})
	var got []string
	for _, l := range links {
		got = append(got, l.Href+" "+l.Message)
	}
	want := "#schedule-cron minute 61 is outside 0-59|#executors unknown node \"x\"|#project-pools at most 32 pools| key: is taken"
	if strings.Join(got, "|") != want {
		t.Fatalf("summary %q, want %q", strings.Join(got, "|"), want)
	}
}
