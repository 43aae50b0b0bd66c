package main

import (
	"slices"
	"strings"
	"testing"
)

// TestParseAllowTypes: --allow-types takes the gated task types, in any
// case and order, each once; http, shell and unknown names are refused
// with the reason.
func TestParseAllowTypes(t *testing.T) {
	t.Parallel()
	got, msg := parseAllowTypes(" SQL, nats ,,")
	if msg != "" || !slices.Equal(got, []string{"nats", "sql"}) {
		t.Fatalf("parse: %v %q", got, msg)
	}
	if got, msg := parseAllowTypes(""); msg != "" || len(got) != 0 {
		t.Fatalf("empty: %v %q", got, msg)
	}
	for in, want := range map[string]string{"shell": "--allow-shell", "http": "always run", "ftp": "is not one of",
		"nats,nats": "listed twice"} {
		if _, msg := parseAllowTypes(in); !strings.Contains(msg, want) {
			t.Errorf("%q: %q, want it to say %q", in, msg, want)
		}
	}
}
