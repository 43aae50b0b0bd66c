package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestMisfireNormalizeAndValidate(t *testing.T) {
	t.Parallel()
	base := protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"},
		HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}
	for in, want := range map[string]string{"": "skip", "skip": "skip", " Run_Once ": "run_once"} {
		d := base
		d.Misfire = in
		d.Normalize()
		if d.Misfire != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, d.Misfire, want)
		}
		if err := d.Validate(time.Now()); err != nil {
			t.Errorf("misfire %q refused: %v", in, err)
		}
	}
	d := base
	d.Misfire = "later"
	d.Normalize()
	var fe protocol.FieldErrors
	if err := d.Validate(time.Now()); !errors.As(err, &fe) || fe["misfire"] != `"later" is not skip or run_once` {
		t.Fatalf("misfire later: %v", err)
	}
}
