package worker

import (
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// A run once of a broadcast task is told the shard the master sent with it,
// as env and placeholders; other routings run the spec unchanged.
func TestRunOnceSpecShardsBroadcastRuns(t *testing.T) {
	t.Parallel()
	scheduled := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "b", Routing: protocol.RoutingBroadcast,
		Params: map[string]string{"K": "v"}, Shell: &protocol.ShellSpec{Command: "x"}}, ShardIndex: 2, ShardTotal: 3}
	sent := scheduled
	sent.ShardIndex, sent.ShardTotal = 0, 2 // an executor went down since the schedule was pushed

	got := runOnceSpec(scheduled, &sent)
	if got.Params["SHARD_INDEX"] != "0" || got.Params["SHARD_TOTAL"] != "2" || got.Params["K"] != "v" {
		t.Fatalf("params %v: want the sent shard 0/2 and K kept", got.Params)
	}
	if got.Shell.Env["SM_SHARD_INDEX"] != "0" || got.Shell.Env["SM_SHARD_TOTAL"] != "2" {
		t.Fatalf("env %v: want SM_SHARD_INDEX=0 SM_SHARD_TOTAL=2", got.Shell.Env)
	}
	if _, shared := scheduled.Params["SHARD_INDEX"]; shared || scheduled.Shell.Env != nil {
		t.Fatal("the scheduled spec was modified")
	}
	// Without a sent shard the scheduled one is used.
	if got := runOnceSpec(scheduled, nil); got.Params["SHARD_INDEX"] != "2" || got.Params["SHARD_TOTAL"] != "3" {
		t.Fatalf("params %v: want the scheduled shard 2/3", got.Params)
	}
	weighted := scheduled
	weighted.Routing = protocol.RoutingWeighted
	if got := runOnceSpec(weighted, &sent); len(got.Params) != 1 || got.Shell.Env != nil {
		t.Fatalf("a weighted task's run once changed: %+v", got)
	}
}
