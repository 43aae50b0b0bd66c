package worker

import (
	"maps"
	"strconv"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// sharded tells one broadcast run its shard: SM_SHARD_INDEX and
// SM_SHARD_TOTAL in a shell task's environment and {{SHARD_INDEX}} and
// {{SHARD_TOTAL}} placeholders everywhere params expand. The maps are copied:
// the scheduled spec is shared by every fire.
func sharded(spec protocol.TaskSpec) protocol.TaskSpec {
	idx, total := strconv.Itoa(spec.ShardIndex), strconv.Itoa(max(spec.ShardTotal, 1))
	spec.Params = maps.Clone(spec.Params)
	if spec.Params == nil {
		spec.Params = map[string]string{}
	}
	spec.Params["SHARD_INDEX"], spec.Params["SHARD_TOTAL"] = idx, total
	if spec.Shell != nil {
		sh := *spec.Shell
		sh.Env = maps.Clone(sh.Env)
		if sh.Env == nil {
			sh.Env = map[string]string{}
		}
		sh.Env["SM_SHARD_INDEX"], sh.Env["SM_SHARD_TOTAL"] = idx, total
		spec.Shell = &sh
	}
	return spec
}
