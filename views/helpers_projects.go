package views

import "context"

// tokenProject names a token's project, "(cluster)" for a cluster token.
func tokenProject(ctx context.Context, p string) string {
	if p == "" {
		return T(ctx, "TokenClusterProject")
	}
	return p
}

// tokenRole names a token's role cap.
func tokenRole(ctx context.Context, r string) string {
	if r == "" {
		return T(ctx, "TokenOwnersRole")
	}
	return ProjectRoleName(ctx, r)
}
