package protocol_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Every decision that depends on a run's result, for every result (and one
// this version does not know). The rows are the behaviour the branches had
// before they became methods: change a cell only with the behaviour.
func TestResultDecisions(t *testing.T) {
	t.Parallel()
	type row struct {
		reported, ended, succeeded, failure, health, notifies, retryable, usesAttempt bool
	}
	cases := map[protocol.Result]row{
		protocol.ResultSuccess: {reported: true, ended: true, succeeded: true, health: true, usesAttempt: true},
		protocol.ResultFailed:  {reported: true, ended: true, failure: true, health: true, notifies: true, retryable: true, usesAttempt: true},
		protocol.ResultTimeout: {reported: true, ended: true, failure: true, health: true, notifies: true, retryable: true, usesAttempt: true},
		protocol.ResultSkipped: {reported: true, ended: true, retryable: false},
		protocol.ResultKilled:  {reported: true, ended: true, failure: true, health: true, usesAttempt: true},
		protocol.ResultRunning: {reported: true},
		protocol.ResultLost:    {ended: true, failure: true, health: true, usesAttempt: true},
		"great":                {ended: true, usesAttempt: true},
		"":                     {ended: true, usesAttempt: true},
	}
	for res, want := range cases {
		got := row{
			reported: res.Reported(), ended: res.Ended(), succeeded: res.Succeeded(), failure: res.Failure(),
			health: res.CountsInHealth(), notifies: res.Notifies(), retryable: res.Retryable(), usesAttempt: res.UsesAttempt(),
		}
		if got != want {
			t.Errorf("%q: got %+v, want %+v", res, got, want)
		}
	}
}

func TestCatchUpValidate(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good := protocol.CatchUp{Fires: 3, First: at, Last: at.Add(2 * time.Second)}
	if err := good.Validate(); err != nil {
		t.Fatalf("good catch-up refused: %v", err)
	}
	for name, c := range map[string]protocol.CatchUp{
		"no fire":        {Fires: 0, First: at, Last: at},
		"negative":       {Fires: -5, First: at, Last: at},
		"over the bound": {Fires: protocol.MaxCovers + 1, First: at, Last: at},
		"no first":       {Fires: 1},
		"reversed":       {Fires: 2, First: at, Last: at.Add(-time.Second)},
	} {
		if err := c.Validate(); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
