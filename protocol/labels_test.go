package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestParseLabels(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63)
	cases := []struct {
		in   string
		want string // canonical String() when valid
		err  string // substring of the error; "" means valid
	}{
		{"", "", ""},
		{"   ", "", ""},
		{"pool=billing,zone=eu-1", "pool=billing,zone=eu-1", ""},
		{" zone=eu-1 , pool=billing ", "pool=billing,zone=eu-1", ""},
		{"gpu=", "gpu=", ""},
		{"example.com/pool=a_b.c", "example.com/pool=a_b.c", ""},
		{"a-b.c/X_y=Z9", "a-b.c/X_y=Z9", ""},
		{"a_b.c/x=1", "", `label "a_b.c/x=1": key prefix "a_b.c" must be a DNS subdomain`},
		{"Example.com/pool=a", "", `key prefix "Example.com"`},
		{"example..com/pool=a", "", "key prefix"},
		{"-x.com/pool=a", "", "key prefix"},
		{"/pool=a", "", `key prefix ""`},
		{"a/b/c=d", "", "key name after the prefix"},
		{long + "=" + long, long + "=" + long, ""},
		{long + "a=v", "", "key is longer than 63 characters"},
		{"k=" + long + "a", "", "value is longer than 63 characters"},
		{"zone=eu 1", "", `label "zone=eu 1": value must be empty or letters`},
		{"zone=-eu", "", "value must be"},
		{"zone=eu-", "", "value must be"},
		{"zone=é", "", "value must be"},
		{"_zone=a", "", "key must be"},
		{"zone", "", `label "zone": must be key=value`},
		{"=v", "", "key is empty"},
		{"a=1,,b=2", "", `label "": empty label`},
		{"a=1,", "", "empty label"},
		{"a=1,a=2", "", `label "a=2": key "a" is given twice`},
		{"a=b=c", "", "value must be"},
		{"a=\x00", "", `label "a=\x00"`},
		{"a=\xff", "", `label "a=\xff"`},
		{"a\n=b", "", "key must be"},
		{strings.Repeat("x", 10000), "", "longer than"},
	}
	for _, c := range cases {
		l, err := protocol.ParseLabels(c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("ParseLabels(%q): %v", c.in, err)
		case c.err == "" && l == nil:
			t.Errorf("ParseLabels(%q): nil map", c.in)
		case c.err == "" && l.String() != c.want:
			t.Errorf("ParseLabels(%q) = %q, want %q", c.in, l.String(), c.want)
		case c.err != "" && err == nil:
			t.Errorf("ParseLabels(%q) = %v, want an error with %q", c.in, l, c.err)
		case c.err != "" && !strings.Contains(err.Error(), c.err):
			t.Errorf("ParseLabels(%q): %v, want %q in it", c.in, err, c.err)
		case c.err != "" && !errors.Is(err, protocol.ErrInvalid):
			t.Errorf("ParseLabels(%q): %v does not match ErrInvalid", c.in, err)
		}
		if err == nil {
			// The canonical form reads back to the same labels.
			again, err := protocol.ParseLabels(l.String())
			if err != nil || again.String() != l.String() {
				t.Errorf("round trip of %q: %q, %v", l.String(), again.String(), err)
			}
		}
	}
}

func TestParseLabelsLimit(t *testing.T) {
	t.Parallel()
	var items []string
	for i := range protocol.MaxLabels + 1 {
		items = append(items, "k"+string(rune('a'+i))+"=v")
	}
	if l, err := protocol.ParseLabels(strings.Join(items[:protocol.MaxLabels], ",")); err != nil || len(l) != protocol.MaxLabels {
		t.Fatalf("%d labels: %v, %v", protocol.MaxLabels, l, err)
	}
	_, err := protocol.ParseLabels(strings.Join(items, ","))
	if err == nil || !strings.Contains(err.Error(), "more than 16 labels") {
		t.Fatalf("%d labels: %v", len(items), err)
	}
}

func TestLabelsValidate(t *testing.T) {
	t.Parallel()
	var none protocol.Labels
	if err := none.Validate(); err != nil {
		t.Fatalf("nil: %v", err)
	}
	if err := (protocol.Labels{"pool": "billing", "gpu": "", "example.com/x": "y"}).Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	bad := map[string]protocol.Labels{
		`label "a b=c": key must be`:              {"a b": "c"},
		`label "k=v,w": value must be`:            {"k": "v,w"},
		`label "k=\x00": value must be`:           {"k": "\x00", "z": "ok"},
		`label "=v": key is empty`:                {"": "v"},
		`label "a=\xff": value must be`:           {"a": "\xff"},
		`17 labels, more than 16`:                 many(17),
		`label "Ex.com/a=b": key prefix "Ex.com"`: {"Ex.com/a": "b"},
	}
	for want, l := range bad {
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("Validate(%v): %v, want %q", l, err, want)
		}
	}
	if err := many(16).Validate(); err != nil {
		t.Errorf("16 labels: %v", err)
	}
}

func many(n int) protocol.Labels {
	l := protocol.Labels{}
	for i := range n {
		l["k"+string(rune('a'+i))] = "v"
	}
	return l
}

func TestLabelsString(t *testing.T) {
	t.Parallel()
	if got := (protocol.Labels{"z": "1", "a": "", "m": "x"}).String(); got != "a=,m=x,z=1" {
		t.Fatalf("String = %q", got)
	}
	if got := protocol.Labels(nil).String(); got != "" {
		t.Fatalf("nil String = %q", got)
	}
}

func TestMergeLabels(t *testing.T) {
	t.Parallel()
	worker := protocol.Labels{"pool": "billing", "zone": "eu-1"}
	admin := protocol.Labels{"pool": "reports", "gpu": ""}
	got := protocol.MergeLabels(worker, admin)
	if got.String() != "gpu=,pool=reports,zone=eu-1" {
		t.Fatalf("merge = %q", got.String())
	}
	got["new"] = "x"
	if _, ok := worker["new"]; ok || worker["pool"] != "billing" || len(admin) != 2 {
		t.Fatalf("merge changed its arguments: %v %v", worker, admin)
	}
	if m := protocol.MergeLabels(nil, nil); m == nil || len(m) != 0 {
		t.Fatalf("merge of nils = %#v", m)
	}
}
