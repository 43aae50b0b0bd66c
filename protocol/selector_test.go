package protocol_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestSelectorMatches(t *testing.T) {
	t.Parallel()
	billingEU := protocol.Labels{"pool": "billing", "zone": "eu-1"}
	billingUS := protocol.Labels{"pool": "billing", "zone": "us-1"}
	noZone := protocol.Labels{"pool": "billing"}
	emptyZone := protocol.Labels{"pool": "billing", "zone": ""}
	none := protocol.Labels(nil)
	all := []protocol.Labels{billingEU, billingUS, noZone, emptyZone, none}
	cases := []struct {
		sel  string
		want []bool // per entry of all
	}{
		{"zone=eu-1", []bool{true, false, false, false, false}},
		{"zone==eu-1", []bool{true, false, false, false, false}},
		{"zone = eu-1", []bool{true, false, false, false, false}},
		{"zone!=eu-1", []bool{false, true, true, true, true}}, // lacking the key matches
		{"zone,zone!=eu-1", []bool{false, true, false, true, false}},
		{"zone in (eu-1,us-1)", []bool{true, true, false, false, false}},
		{"zone in (eu-1)", []bool{true, false, false, false, false}},
		{"zone notin (eu-1,us-1)", []bool{false, false, true, true, true}}, // lacking the key matches
		{"zone", []bool{true, true, false, true, false}},
		{"!zone", []bool{false, false, true, false, true}},
		{"zone=", []bool{false, false, false, true, false}},
		{"zone!=", []bool{true, true, true, false, true}},
		{"pool=billing,zone in (us-1)", []bool{false, true, false, false, false}},
		{"pool=billing,!zone", []bool{false, false, true, false, false}},
		{"pool=reports", []bool{false, false, false, false, false}},
		{"", []bool{false, false, false, false, false}}, // empty matches nothing
		{"  ", []bool{false, false, false, false, false}},
	}
	for _, c := range cases {
		s, err := protocol.ParseSelector(c.sel)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", c.sel, err)
			continue
		}
		for i, l := range all {
			if got := s.Matches(l); got != c.want[i] {
				t.Errorf("%q matches %v = %v, want %v", c.sel, l, got, c.want[i])
			}
		}
	}
	var zero protocol.Selector
	if !zero.Empty() || zero.Matches(billingEU) || zero.Matches(nil) || zero.String() != "" {
		t.Fatal("the zero Selector is not empty or matches something")
	}
	if s, _ := protocol.ParseSelector("!zone"); s.Empty() {
		t.Fatal("!zone is empty")
	}
}

func TestSelectorString(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                                "",
		"zone==eu-1":                      "zone=eu-1",
		" zone = eu-1 ":                   "zone=eu-1",
		"zone in (us-1, eu-1, us-1)":      "zone in (eu-1,us-1)",
		"zone in (eu-1)":                  "zone=eu-1",
		"zone notin (eu-1)":               "zone!=eu-1",
		"zone in (eu-1,eu-1)":             "zone=eu-1",
		"zone notin(b,a)":                 "zone notin (a,b)",
		"! gpu":                           "!gpu",
		"zone,pool=a,!gpu,zone!=x,pool":   "!gpu,pool,pool=a,zone,zone!=x",
		"b=1,a=1,b=1":                     "a=1,b=1",
		"k=,j":                            "j,k=",
		"k notin (b),k in (b,a),k in (c)": "k=c,k!=b,k in (a,b)",
		"in in (in,notin),notin":          "in in (in,notin),notin",
		"example.com/pool=x":              "example.com/pool=x",
	}
	for in, want := range cases {
		s, err := protocol.ParseSelector(in)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", in, err)
			continue
		}
		if got := s.String(); got != want {
			t.Errorf("ParseSelector(%q).String() = %q, want %q", in, got, want)
		}
		again, err := protocol.ParseSelector(s.String())
		if err != nil || again.String() != s.String() {
			t.Errorf("round trip of %q: %q, %v", s.String(), again.String(), err)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in  string
		pos int
		msg string
	}{
		{"pool=billing,zone in eu-1", 22, `expected "(" after "in", found "eu-1"`},
		{"zone in", 8, `expected "(" after "in", found the end`},
		{"zone in ()", 10, "expected a value in the list, found \")\""},
		{"zone in (a,)", 12, "expected a value in the list"},
		{"zone in (a b)", 12, `expected "," or ")" in the list, found "b"`},
		{"zone in (a", 11, `expected "," or ")" in the list, found the end`},
		{"zone notin (a,é)", 15, `"é": value must be`},
		{"zone=eu 1", 9, `expected "," or the end after a requirement, found "1"`},
		{"zone=(a)", 6, `expected a value after "=", found "("`},
		{"zone=a=b", 7, `expected "," or the end after a requirement, found "="`},
		{"zone!", 5, `after key "zone", found "!"`},
		{"zone eu", 6, `expected "=", "==", "!=", "in", "notin", "," or the end after key "zone", found "eu"`},
		{"zone>1", 5, `operator ">" is not supported`},
		{"zone<1", 5, `operator "<" is not supported`},
		{"!zone=a", 6, `expected "," or the end after a requirement, found "="`},
		{"!", 2, "expected a key, found the end"},
		{"!!a", 2, `expected a key, found "!"`},
		{",a", 1, `expected a key, found ","`},
		{"a,", 3, "expected a key, found the end"},
		{"a,,b", 3, `expected a key, found ","`},
		{"=a", 1, `expected a key, found "="`},
		{"_a=b", 1, `"_a": key must be`},
		{"a=b-", 3, `"b-": value must be`},
		{"Ex.com/a", 1, `key prefix "Ex.com"`},
		{"äö=1", 1, `"äö": key must be`},
		{"zé=1,x=\x00", 8, "NUL character"},
		{"zé=1\tx", 5, "control character U+0009"},
		{"a=1\n", 4, "control character U+000A"},
		{"a\u0085", 2, "control character U+0085"},
		{"éa=\xff", 4, "invalid UTF-8"},
		{strings.Repeat("a", 64) + "=1", 1, "key is longer than 63 characters"},
		{"k=" + strings.Repeat("a", 64), 3, "value is longer than 63 characters"},
		{strings.Repeat("é", 600), 513, "longer than 1024 bytes"},
		{strings.Repeat("a,", 16) + "b", 33, "more than 16 requirements"},
	}
	for _, c := range cases {
		s, err := protocol.ParseSelector(c.in)
		var se *protocol.SelectorError
		if !errors.As(err, &se) {
			t.Errorf("ParseSelector(%q) = %q, %v: want a *SelectorError", c.in, s.String(), err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("ParseSelector(%q): %v\nwant at character %d: %s", c.in, err, c.pos, c.msg)
		}
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("ParseSelector(%q): %v does not match ErrInvalid", c.in, err)
		}
		if !s.Empty() {
			t.Errorf("ParseSelector(%q) failed but returned %q", c.in, s.String())
		}
	}
	if _, err := protocol.ParseSelector(strings.Repeat("a,", 15) + "b"); err != nil {
		t.Errorf("16 requirements: %v", err)
	}
}

func TestSelectorErrorText(t *testing.T) {
	t.Parallel()
	_, err := protocol.ParseSelector("pool=billing,zone in eu-1")
	want := `selector "pool=billing,zone in eu-1": at character 22: expected "(" after "in", found "eu-1"`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
	long := strings.Repeat("a", 50) + "," + strings.Repeat("b", 50) + ",="
	_, err = protocol.ParseSelector(long)
	want = `selector "` + long[:80] + `...": at character 103: expected a key, found "="`
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
	_, err = protocol.ParseSelector("a=\x00")
	if err == nil || !strings.Contains(err.Error(), `selector "a=\x00": at character 3: NUL`) {
		t.Fatalf("NUL error: %v", err)
	}
}

// The canonical form writes "in (" where "in(" was enough: a selector whose
// canonical form would pass MaxSelectorLen is refused, so String always fits.
func TestSelectorCanonicalFits(t *testing.T) {
	t.Parallel()
	var vals []string
	for i := range 202 {
		vals = append(vals, fmt.Sprintf("v%03d", i))
	}
	in := "k in(" + strings.Join(append(vals, "v202zzzz"), ",") + ")"
	if len(in) != protocol.MaxSelectorLen {
		t.Fatalf("test input is %d bytes", len(in))
	}
	_, err := protocol.ParseSelector(in)
	if err == nil || !strings.Contains(err.Error(), "in canonical form (1025)") {
		t.Fatalf("%d bytes writing %d canonical: %v", len(in), len(in)+1, err)
	}
	s, err := protocol.ParseSelector(strings.Replace(in, "zzzz", "zzz", 1))
	if err != nil || len(s.String()) != protocol.MaxSelectorLen {
		t.Fatalf("one byte shorter: %d bytes, %v", len(s.String()), err)
	}
}

func TestSelectorImpliesPool(t *testing.T) {
	t.Parallel()
	cases := []struct {
		task, pool string
		want       bool
	}{
		{"pool=billing", "pool=billing", true},
		{"pool=billing,zone=eu-1", "pool=billing", true},
		{"pool=reports", "pool=billing", false},
		{"zone=eu-1", "pool=billing", false},
		{"pool in (billing,reports)", "pool=billing", false},
		{"pool=billing", "pool in (billing,reports)", true},
		{"pool in (billing,reports)", "pool in (billing,reports,ml)", true},
		{"pool", "pool", true},
		{"pool=billing", "pool", true},
		{"pool", "pool=billing", false},
		{"gpu=false", "gpu!=true", true},
		{"gpu!=true", "gpu!=true", true},
		{"gpu notin (true,yes)", "gpu!=true", true},
		{"gpu!=yes", "gpu!=true", false},
		{"!gpu", "gpu!=true", true},
		{"!gpu", "!gpu", true},
		{"gpu=false", "!gpu", false},
		{"pool=billing,gpu=false", "pool=billing,gpu!=true", true},
		{"pool=billing", "pool=billing,gpu!=true", false},
	}
	for _, c := range cases {
		task, err := protocol.ParseSelector(c.task)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := protocol.ParseSelector(c.pool)
		if err != nil {
			t.Fatal(err)
		}
		if got := task.Implies(pool); got != c.want {
			t.Errorf("%q implies %q = %v, want %v", c.task, c.pool, got, c.want)
		}
		// Soundness on sample label sets: whatever task matches, pool matches.
		if c.want {
			for _, l := range []protocol.Labels{{"pool": "billing"}, {"pool": "reports"}, {"pool": "billing", "gpu": "false"}, {"pool": "billing", "gpu": "true"}, {"pool": "billing", "zone": "eu-1"}, {}} {
				if task.Matches(l) && !pool.Matches(l) {
					t.Errorf("%q implies %q, yet %v matches only the first", c.task, c.pool, l)
				}
			}
		}
	}
}
