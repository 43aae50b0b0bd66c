package worker

import (
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// BenchmarkScheduledFire measures naming the fire a cron run belongs to, done
// once per run before the task starts (part of the trigger lag, SPEC 9).
func BenchmarkScheduledFire(b *testing.B) {
	for _, expr := range []string{"* * * * * *", "*/5 * * * * *", "0 * * * * *", "0 0 * * *"} {
		b.Run(expr, func(b *testing.B) {
			sch, err := protocol.ParseCron(expr)
			if err != nil {
				b.Fatal(err)
			}
			tj := &taskJob{spec: protocol.TaskSpec{TaskDef: protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: expr}}}, cron: sch}
			now := time.Date(2026, 11, 22, 10, 0, 0, 1_500_000, time.UTC)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = tj.scheduledFire(now)
			}
		})
	}
}
