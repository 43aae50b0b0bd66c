package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// SlotUnit is how long the slots of RunsPerSlot are.
type SlotUnit int

// Slot units of the dashboard's chart ranges.
const (
	SlotMinute SlotUnit = iota
	SlotHour
	SlotDay
)

// SlotLayout is the Go time layout of a slot's key, as RunsPerSlot writes it.
func (u SlotUnit) SlotLayout() string {
	switch u {
	case SlotMinute:
		return "2006-01-02 15:04"
	case SlotHour:
		return "2006-01-02 15"
	}
	return time.DateOnly
}

// slotExpr is the UTC slot of a timestamp column in the dialect of db, in
// the layout of u.SlotLayout.
func slotExpr(db bun.IDB, col string, u SlotUnit) string {
	if u == SlotDay {
		return dayExpr(db, col)
	}
	switch db.Dialect().Name() {
	case dialect.MySQL:
		if u == SlotHour {
			return "DATE_FORMAT(" + col + ", '%Y-%m-%d %H')"
		}
		return "DATE_FORMAT(" + col + ", '%Y-%m-%d %H:%i')"
	case dialect.PG:
		if u == SlotHour {
			return "to_char(" + col + ", 'YYYY-MM-DD HH24')"
		}
		return "to_char(" + col + ", 'YYYY-MM-DD HH24:MI')"
	}
	if u == SlotHour {
		return "strftime('%Y-%m-%d %H', " + col + ")"
	}
	return "strftime('%Y-%m-%d %H:%M', " + col + ")"
}

// RunsPerSlot counts the runs that started in [from, to) by UTC slot (a
// minute, an hour or a day: see SlotLayout) and result, in one aggregate
// query over the index on runs(started_at); the Day of each count is its
// slot. projects limits the runs (nil: every run).
func RunsPerSlot(ctx context.Context, db bun.IDB, u SlotUnit, from, to time.Time, projects []int64) ([]DayCount, error) {
	var rows []DayCount
	slot := slotExpr(db, "started_at", u)
	err := runsInProjects(db.NewSelect().Table("runs"), "", projects).
		ColumnExpr(slot+" AS day").Column("result").ColumnExpr("COUNT(*) AS n").
		Where("started_at >= ?", from.UTC()).Where("started_at < ?", to.UTC()).
		GroupExpr(slot).Group("result").OrderExpr("day ASC").
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: runs per slot: %w", err)
	}
	return rows, nil
}
