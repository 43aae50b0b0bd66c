package views

// noExecutorText explains why a running task cannot run; since is the latest
// status change among its executors (UTC), "" when it has none left.
func noExecutorText(since string) string {
	if since == "" {
		return "No running executor: this task has no executor left, so its fires cannot run anywhere."
	}
	return "No running executor since " + since + " (when the last of its executors went offline or was disabled): its fires cannot run anywhere until one is running again."
}

// taskNoun is "task" or "tasks" for n.
func taskNoun(n int) string {
	if n == 1 {
		return "task"
	}
	return "tasks"
}
