package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// TestCronErrorsAreSentences: a refused cron expression is said in a
// sentence naming the field and why, not in the parser's words; hashed (H)
// fields keep working and keep their own sentences.
func TestCronErrorsAreSentences(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, want string }{
		{"61 * * * *", "minute 61 is outside 0-59"},
		{"* 24 * * *", "hour 24 is outside 0-23"},
		{"0 0 0 * *", "day of month 0 is outside 1-31"},
		{"0 0 32 * *", "day of month 32 is outside 1-31"},
		{"0 0 * 13 *", "month 13 is outside 1-12"},
		{"0 0 * * 7", "day of week 7 is outside 0-6"},
		{"60 * * * * *", "second 60 is outside 0-59"},
		{"0 0 * * fooday", `day of week "fooday" is not a number or a name like mon`},
		{"0 0 * foo *", `month "foo" is not a number or a name like jan`},
		{"x * * * *", `minute "x" is not a number`},
		{"-1 * * * *", `minute "-1" is not a number`},
		{"30-10 * * * *", "minute range 30-10 runs backwards"},
		{"0 0 * * fri-mon", "day of week range 5-1 runs backwards"},
		{"*/0 * * * *", `minute step "0" must be a whole number of at least 1`},
		{"0 */x * * *", `hour step "x" must be a whole number of at least 1`},
		{"1-2-3 * * * *", `minute "1-2-3" has more than one "-"`},
		{"*/5/2 * * * *", `minute "*/5/2" has more than one "/"`},
		{"5,61 * * * *", "minute 61 is outside 0-59"},
		{"every tuesday", "has 2 fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds"},
		{"*", "has 1 field; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds"},
		{"a b c d e f g", "has 7 fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds"},
		{"@fortnightly", `"@fortnightly" is not a shorthand cron knows: use @yearly, @monthly, @weekly, @daily, @hourly or @every with a duration`},
		{"@every x", "@every needs a duration like 30s or 5m"},
		{"H 24 * * *", "hour 24 is outside 0-23"},
		{"H(0-99) * * * *", `minute "H(0-99)": H(0-99) is outside 0-59`},
		{"H(9-3) * * * *", `minute "H(9-3)": H(9-3) runs backwards`},
		{"H/0 * * * *", `minute "H/0": H/n needs a whole number n of at least 1`},
		{"H/100 * * * *", `minute "H/100": the step 100 is longer than the range 0-59`},
		{"H(1-5 * * * *", `minute "H(1-5": H must be H, H(a-b), H/n or H(a-b)/n: missing )`},
		{"Hx * * * *", `minute "Hx": H must be H, H(a-b), H/n or H(a-b)/n`},
		{"H(a-b) * * * *", `minute "H(a-b)": H(a-b) needs whole numbers`},
		{"H(1) * * * *", `minute "H(1)": H must be H, H(a-b), H/n or H(a-b)/n: H(a-b) needs a range like H(0-29)`},
		{"H H H", "H needs 5 fields, or 6 with leading seconds (got 3)"},
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		d := protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: tc.expr}}
		d.Normalize()
		var fe protocol.FieldErrors
		if err := d.Validate(now); !errors.As(err, &fe) {
			t.Errorf("%q: Validate = %v, want a field error", tc.expr, err)
			continue
		}
		if got := fe["schedule.cron"]; got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.expr, got, tc.want)
		}
	}
	// What the parser accepts, the sentences never refuse: names, lists,
	// steps, ranges, ?, descriptors and H forms.
	for _, ok := range []string{"*/5 * * * *", "0 3 * * 1-5", "0 0 1 jan,JUL *", "0 9 * * MON-fri", "*/15 * * * * *",
		"0 0 ? * sun", "5/10 * * * *", "@hourly", "@every 5m", "H H(0-6) * * *", "H/15 * * * *", "0 0 29 2 *"} {
		d := protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: ok}}
		d.Normalize()
		if err := d.Validate(now); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}
