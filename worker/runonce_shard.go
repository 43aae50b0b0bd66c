package worker

import "github.com/schedulemaster-go/schedulemaster/protocol"

// runOnceSpec is the spec a run once of a task runs with (a manual run, a
// child run, or the master's misfire catch-up). Under broadcast routing the
// master sends it to every running executor with that executor's shard, and
// the run is told its shard as a scheduled fire is (sharded): SM_SHARD_INDEX
// and SM_SHARD_TOTAL, {{SHARD_INDEX}} and {{SHARD_TOTAL}}. The shard the
// master sent with the request wins over the one scheduled here, which may
// predate the latest change of the running executors.
//
// Worker.RunOnce calls it on the spec it is about to run.
func runOnceSpec(spec protocol.TaskSpec, sent *protocol.TaskSpec) protocol.TaskSpec {
	if spec.Routing != protocol.RoutingBroadcast {
		return spec
	}
	if sent != nil && sent.ID == spec.ID && sent.ShardTotal > 0 {
		spec.ShardIndex, spec.ShardTotal = sent.ShardIndex, sent.ShardTotal
	}
	return sharded(spec)
}
