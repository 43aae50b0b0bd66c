package protocol_test

import (
	"testing"

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
		protocol.ResultSkipped: {reported: true, ended: true, retryable: true},
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
