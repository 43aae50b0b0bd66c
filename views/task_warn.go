package views

import "context"

// noExecutorText explains why a running task cannot run; since is the latest
// status change among its executors (UTC), "" when it has none left.
func noExecutorText(ctx context.Context, since string) string {
	if since == "" {
		return T(ctx, "NoExecutorNone")
	}
	return T(ctx, "NoExecutorSince", "Since", since)
}
