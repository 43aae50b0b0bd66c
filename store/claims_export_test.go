package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// WinnerAfterConflict is winnerAfterConflict, for the test that reads a
// winner on a Galera node that has not applied it yet.
func WinnerAfterConflict(ctx context.Context, db bun.IDB, taskID string, fire time.Time) (string, error) {
	return winnerAfterConflict(ctx, db, taskID, fire)
}
