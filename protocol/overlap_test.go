package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestOverlapNormalizeAndValidate(t *testing.T) {
	t.Parallel()
	base := protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"},
		HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}
	for in, want := range map[string]string{"": "allow", "allow": "allow", " Skip ": "skip", "QUEUE": "queue"} {
		d := base
		d.Overlap = in
		d.Normalize()
		if d.Overlap != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, d.Overlap, want)
		}
		if err := d.Validate(time.Now()); err != nil {
			t.Errorf("overlap %q refused: %v", in, err)
		}
	}
	d := base
	d.Overlap = "sometimes"
	d.Normalize()
	var fe protocol.FieldErrors
	if err := d.Validate(time.Now()); !errors.As(err, &fe) || fe["overlap"] != `"sometimes" is not allow, skip or queue` {
		t.Fatalf("overlap sometimes: %v", err)
	}
}
