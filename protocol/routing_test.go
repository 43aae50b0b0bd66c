package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestRoutingNormalizeAndValidate(t *testing.T) {
	t.Parallel()
	base := protocol.TaskDef{Title: "t", Type: protocol.TaskHTTP, Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "0 * * * *"},
		HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}, Params: map[string]string{"order": "42"}}
	for in, want := range map[string]string{"": "weighted", " Round_Robin ": "round_robin", "failover": "failover",
		"least_busy": "least_busy", "broadcast": "broadcast", "HASH": "hash"} {
		d := base
		d.Routing, d.RoutingKey = in, " order "
		d.Normalize()
		if d.Routing != want || d.RoutingKey != "order" {
			t.Errorf("Normalize(%q) = %q key %q, want %q", in, d.Routing, d.RoutingKey, want)
		}
		if err := d.Validate(time.Now()); err != nil {
			t.Errorf("routing %q refused: %v", in, err)
		}
	}
	for _, c := range []struct{ routing, key, field, msg string }{
		{"nearest", "", "routing", `"nearest" is not weighted, round_robin, failover, least_busy, hash or broadcast`},
		{"hash", "", "routing_key", "must name a param: hash routing uses its value"},
		{"hash", "customer", "routing_key", "must name a param: hash routing uses its value"},
	} {
		d := base
		d.Routing, d.RoutingKey = c.routing, c.key
		d.Normalize()
		var fe protocol.FieldErrors
		if err := d.Validate(time.Now()); !errors.As(err, &fe) || fe[c.field] != c.msg {
			t.Errorf("routing %q key %q: %v", c.routing, c.key, err)
		}
	}
}
