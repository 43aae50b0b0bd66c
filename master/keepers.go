package master

import (
	"context"
	"errors"
	"fmt"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// keeperReads reports whether the user named may be a keeper of an object
// of the project: one who may read the project now (a cluster admin or
// viewer, or a member). A keeper receives the object's failure notices, so
// no one else may be named; and a name that is not a user and one who may
// not read the project get the same answer (keeperRefusal), so checking
// keepers tells no one which user names exist.
func keeperReads(ctx context.Context, db bun.IDB, name string, project int64) (bool, error) {
	u, err := store.GetUser(ctx, db, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if u.Role == RoleAdmin || u.Role == RoleViewer {
		return true, nil
	}
	ms, err := store.MembershipsOf(ctx, db, name)
	if err != nil {
		return false, err
	}
	return ProjectRole(ms[project]).Valid(), nil
}

// keeperRefusal is the field error of a keeper keeperReads refused.
func keeperRefusal(name string) string {
	return fmt.Sprintf("%q is not a user who may read this project", printable(name))
}
