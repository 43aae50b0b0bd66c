package master

import "context"

type actorKey struct{}

// WithActor returns a context that names who is acting (a user, "token:NAME"),
// so the engine can record it in the event log.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor named by WithActor, or "system".
func ActorFrom(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "system"
}
