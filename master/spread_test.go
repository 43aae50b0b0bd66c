package master_test

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/migrations"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestIntervalAlignOnCreateEditAndUpgrade: a new interval task spreads
// unless it asks for the epoch; a task stored before alignments existed is
// marked epoch by the migration and keeps it through edits that name none.
func TestIntervalAlignOnCreateEditAndUpgrade(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		runningWorkers(e, "w1")

		in := httpInput("w1")
		in.Schedule.Align = ""
		tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if tk.Schedule.Align != protocol.AlignSpread {
			t.Fatalf("a new interval task has align %q, want spread", tk.Schedule.Align)
		}
		in.Schedule.Align = "diagonal"
		if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); !isFieldErrors(err, "schedule.align") {
			t.Fatalf("a bad align: %v, want a field error on schedule.align", err)
		}

		// As stored by a version before alignments: no align in the spec.
		old, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		db := s.Store.DB
		if _, err := db.NewRaw(`UPDATE tasks SET spec = REPLACE(spec, ',"align":"epoch"', '') WHERE id = ?`, old.ID).Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
		var spec string
		if err := db.NewRaw(`SELECT spec FROM tasks WHERE id = ?`, old.ID).Scan(e.ctx, &spec); err != nil || strings.Contains(spec, "align") {
			t.Fatalf("old spec %s (%v)", spec, err)
		}
		// The upgrade's migration, run again on that row.
		files, _ := fs.Glob(migrations.FS, s.Name+"/*_interval_align.up.sql")
		if len(files) != 1 {
			t.Fatalf("the %s align migration: %v", s.Name, files)
		}
		sql, _ := fs.ReadFile(migrations.FS, files[0])
		if _, err := db.ExecContext(e.ctx, string(sql)); err != nil {
			t.Fatalf("migration: %v", err)
		}
		got, err := e.m.Tasks().Get(e.ctx, old.ID)
		if err != nil || got.Schedule.Align != protocol.AlignEpoch {
			t.Fatalf("after the migration: align %q (%v), want epoch", got.Schedule.Align, err)
		}
		// The spread task was left alone (and the migration reran harmlessly).
		if got, _ := e.m.Tasks().Get(e.ctx, tk.ID); got.Schedule.Align != protocol.AlignSpread {
			t.Fatalf("the migration changed a spread task to %q", got.Schedule.Align)
		}

		// An edit that names no alignment keeps epoch; one that names spread spreads.
		edit := httpInput("w1")
		edit.Schedule.Align = ""
		edit.Title = "renamed"
		if got, err := e.m.Tasks().Update(e.ctx, old.ID, edit); err != nil || got.Schedule.Align != protocol.AlignEpoch {
			t.Fatalf("edit without align: %q (%v), want epoch kept", got.Schedule.Align, err)
		}
		edit.Schedule.Align = protocol.AlignSpread
		if got, err := e.m.Tasks().Update(e.ctx, old.ID, edit); err != nil || got.Schedule.Align != protocol.AlignSpread {
			t.Fatalf("edit to spread: %q (%v)", got.Schedule.Align, err)
		}

		// The console's next fire follows the phase.
		running, err := e.m.Tasks().Start(e.ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		phase := protocol.IntervalPhase(tk.ID, time.Hour)
		if running.NextRunAt == nil || running.NextRunAt.Sub(running.NextRunAt.Truncate(time.Hour)) != phase {
			t.Fatalf("next run %v, want at +%s past an hour", running.NextRunAt, phase)
		}
	})
}
