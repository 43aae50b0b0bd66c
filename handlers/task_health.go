package handlers

import (
	"context"
	"strconv"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Geometry of a task's duration chart, in SVG user units.
const (
	durW      = 960.0
	durH      = 200.0
	durLeft   = 52.0
	durRight  = 64.0 // room for the p50/p95 labels
	durTop    = 12.0
	durBottom = 22.0
	durTicks  = 4
	// durMinSlots keeps a few runs from being drawn as wide slabs.
	durMinSlots = 20
)

// Colours of the chart's bars, by result.
const (
	fillSuccess = "#16a34a"
	fillFailed  = "#dc2626"
	fillTimeout = "#ea580c"
	fillSkipped = "#9ca3af"
)

// tasksHealth reads the health of tasks in one query (for up to a hundred)
// and puts it in each task, for the API.
func (s *server) tasksHealth(ctx context.Context, tasks []*master.Task) error {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	hs, err := s.m.Reads().TasksHealth(ctx, ids, master.HealthWindow)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		t.Health = hs[t.ID]
	}
	return nil
}

// percentText writes a rate as "80%" or "96.7%".
func percentText(rate float64) string {
	p := rate * 100
	if p == float64(int(p)) {
		return strconv.Itoa(int(p)) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// failingText says how many of the latest runs failed: "last 3 runs failed".
func failingText(lc *locale.Localizer, h *master.TaskHealth) string {
	return lc.N("HealthLastFailed", h.LastFailedStreak)
}

// healthTitle sums up a task's health for the list's tooltip.
func healthTitle(lc *locale.Localizer, h *master.TaskHealth) string {
	if h == nil || h.Runs == 0 {
		return lc.T("HealthNoRunYet", "Window", master.HealthWindow)
	}
	return lc.N("HealthTitle", h.Runs, "Rate", percentText(*h.SuccessRate), "P50", durationMS(lc, *h.P50MS), "P95", durationMS(lc, *h.P95MS))
}

// taskHealthVM is the task page's health card.
func taskHealthVM(lc *locale.Localizer, h *master.TaskHealth) views.TaskHealthVM {
	vm := views.TaskHealthVM{Window: h.Window, Runs: h.Runs, Skipped: h.Skipped, Failing: h.Failing()}
	if h.Runs > 0 {
		vm.Rate, vm.P50, vm.P95 = percentText(*h.SuccessRate), durationMS(lc, *h.P50MS), durationMS(lc, *h.P95MS)
		ok := int(*h.SuccessRate*float64(h.Runs) + 0.5)
		vm.RunsText = lc.N("HealthRunsText", h.Runs, "OK", ok)
		if h.Skipped > 0 {
			vm.RunsText += lc.T("HealthSkippedNotCounted", "Skipped", h.Skipped)
		}
	}
	if vm.Failing {
		vm.FailingText = failingText(lc, h)
	}
	if len(h.Recent) > 0 {
		vm.Chart = durationChart(lc, h)
	}
	return vm
}

// durationChart lays out a task's last runs as bars of their durations, the
// newest at the right edge (so a few runs sit next to "newest"): green successes, red failures (with a mark above, so a
// failure that took no time is seen), grey skipped fires, and the p50 and p95
// levels as dashed lines.
func durationChart(lc *locale.Localizer, h *master.TaskHealth) views.DurationChartVM {
	runs := h.Recent
	slots := max(len(runs), durMinSlots)
	plotW, plotH := durW-durLeft-durRight, durH-durTop-durBottom
	baseY := durTop + plotH
	var peak int64
	for _, r := range runs {
		if protocol.Result(r.Result).CountsInHealth() {
			peak = max(peak, r.DurationMS)
		}
	}
	step := niceStep(int(min(peak, 1<<40)), durTicks)
	top := float64(step * durTicks)
	scale := plotH / top
	vm := views.DurationChartVM{
		ViewBox: "0 0 " + num(durW) + " " + num(durH),
		Title:   lc.N("DurationChartTitle", len(runs)),
		Desc:    lc.T("DurationChartDesc", "Summary", healthSummary(lc, h)),
		AxisX1:  num(durLeft), AxisX2: num(durW - durRight), AxisY: num(baseY),
		OldestX: num(durLeft), NewestX: num(durLeft + plotW), LabelY: num(baseY + 16),
	}
	for i := 0; i <= durTicks; i++ {
		v := step * i
		y := baseY - float64(v)*scale
		vm.Ticks = append(vm.Ticks, views.ChartTick{Y: num(y), LabelX: num(durLeft - 6), LabelY: num(y + 4), Label: durationMS(lc, int64(v))})
	}
	slot := plotW / float64(slots)
	barW := max(slot*0.7, 1)
	first := slots - len(runs) // empty slots at the left
	for i := range runs {
		r := runs[len(runs)-1-i] // oldest first
		x := durLeft + float64(first+i)*slot
		bx := x + (slot-barW)/2
		b := views.DurationBar{RunID: r.ID, Result: r.Result,
			Tooltip: lc.T("DurationBarTooltip", "At", utcText(r.StartedAt), "Result", lc.T(resultIDs[r.Result]), "Duration", durationMS(lc, r.DurationMS)),
			Hit:     views.ChartRect{X: num(x), Y: num(durTop), W: num(slot), H: num(plotH), Draw: true}}
		hgt := 3.0 // a skipped fire: a grey stub on the axis
		switch res := protocol.Result(r.Result); {
		case !res.CountsInHealth():
			b.Fill = fillSkipped
		default:
			hgt = max(float64(r.DurationMS)*scale, 2)
			b.Fill = fillSuccess
			if !res.Succeeded() {
				b.Fill, b.Failed = fillFailed, true
				if r.Result == master.ResultTimeout {
					b.Fill = fillTimeout
				}
				b.MarkX, b.MarkY = num(bx+barW/2), num(max(baseY-hgt-6, durTop-4))
			}
		}
		b.Bar = views.ChartRect{X: num(bx), Y: num(baseY - hgt), W: num(barW), H: num(hgt), Draw: true}
		vm.Bars = append(vm.Bars, b)
	}
	if h.Runs > 0 {
		for _, l := range []struct {
			class, name, dash string
			ms                int64
		}{{"health-p50", "p50", "2 3", *h.P50MS}, {"health-p95", "p95", "6 3", *h.P95MS}} {
			y := baseY - float64(l.ms)*scale
			vm.Lines = append(vm.Lines, views.DurationLine{Class: l.class, Y: num(y), LabelX: num(durW - durRight + 4), LabelY: num(y + 4),
				Label: l.name + " " + durationMS(lc, l.ms), Dash: l.dash})
		}
		// Labels of levels close together would overlap: move p95's up.
		if len(vm.Lines) == 2 {
			y50, _ := strconv.ParseFloat(vm.Lines[0].LabelY, 64)
			y95, _ := strconv.ParseFloat(vm.Lines[1].LabelY, 64)
			if y50-y95 < 12 {
				vm.Lines[1].LabelY = num(y50 - 12)
			}
		}
	}
	return vm
}

// healthSummary is the chart's description in words.
func healthSummary(lc *locale.Localizer, h *master.TaskHealth) string {
	if h.Runs == 0 {
		return lc.T("HealthAllSkipped")
	}
	return lc.N("HealthSummary", h.Runs, "Rate", percentText(*h.SuccessRate), "P50", durationMS(lc, *h.P50MS), "P95", durationMS(lc, *h.P95MS))
}
