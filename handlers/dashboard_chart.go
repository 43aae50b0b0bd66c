package handlers

import (
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Geometry of the runs chart, in SVG user units.
const (
	chartW      = 720.0
	chartH      = 240.0
	chartLeft   = 44.0
	chartRight  = 12.0
	chartTop    = 12.0
	chartBottom = 28.0
	chartTicks  = 4
)

// chartRange is one time range the runs chart offers: slots of one unit,
// the newest holding now.
type chartRange struct {
	name  string // the ?range= value
	unit  master.SlotUnit
	slots int
	step  time.Duration
	label string // Go layout of a slot's axis label
	every int    // label every this many slots
	// empty and text are the range's messages: the empty chart's sentence
	// and the range in words (ids written out, so the catalogs' test finds
	// them).
	empty, text string
}

// chartRanges are the ranges the dashboard's chart offers; the first is the default.
var chartRanges = [...]chartRange{
	{name: "24h", unit: master.SlotHour, slots: 24, step: time.Hour, label: "15:00", every: 3, empty: "DashChartEmpty24h", text: "DashRangeText24h"},
	{name: "1h", unit: master.SlotMinute, slots: 60, step: time.Minute, label: "15:04", every: 10, empty: "DashChartEmpty1h", text: "DashRangeText1h"},
	{name: "14d", unit: master.SlotDay, slots: chartDays, step: 24 * time.Hour, label: "01-02", every: 1, empty: "DashChartEmpty"},
}

// chartRangeNamed is the range called name, the default for "" or an unknown name.
func chartRangeNamed(name string) chartRange {
	for _, r := range chartRanges {
		if r.name == name {
			return r
		}
	}
	return chartRanges[0]
}

// first is the start of the range's oldest slot, for a range ending with
// the slot that holds now.
func (r chartRange) first(now time.Time) time.Time {
	return now.UTC().Truncate(r.step).Add(-time.Duration(r.slots-1) * r.step)
}

// rangeChart lays out one bar per slot of the range from first (UTC):
// success at the bottom, failed and timed out stacked on top, with a value
// axis of round numbers.
func rangeChart(lc *locale.Localizer, rg chartRange, first time.Time, counts []master.DayCount) views.ChartVM {
	layout := rg.unit.SlotLayout()
	byDay := map[string]*views.RunCounts{}
	for _, dc := range counts {
		c := byDay[dc.Day]
		if c == nil {
			c = &views.RunCounts{}
			byDay[dc.Day] = c
		}
		addCount(c, dc.Result, dc.N)
	}
	days := rg.slots
	plotW, plotH := chartW-chartLeft-chartRight, chartH-chartTop-chartBottom
	baseY := chartTop + plotH
	day := make([]views.RunCounts, days)
	peak, total := 0, 0
	for i := range days {
		if c := byDay[first.Add(time.Duration(i)*rg.step).Format(layout)]; c != nil {
			day[i] = *c
		}
		peak = max(peak, day[i].Success+day[i].Failed+day[i].Timeout)
		total += day[i].Total
	}
	step := niceStep(peak, chartTicks)
	top := step * chartTicks
	scale := plotH / float64(top)
	last := first.Add(time.Duration(days-1) * rg.step)
	vm := views.ChartVM{
		ViewBox: "0 0 " + num(chartW) + " " + num(chartH), Width: num(chartW), Height: num(chartH),
		AxisX1: num(chartLeft), AxisX2: num(chartW - chartRight), AxisY: num(baseY),
		MaxValue: top, Empty: total == 0,
	}
	if rg.unit == master.SlotDay {
		vm.Title = lc.T("RunsChartTitle", "From", first.Format(time.DateOnly), "To", last.Format(time.DateOnly))
		vm.Desc = lc.N("RunsChartDesc", total, "Days", days)
		vm.EmptyText = lc.T(rg.empty)
	} else {
		vm.EmptyText = lc.T(rg.empty)
		vm.Title = lc.T("RunsChartTitleSlots", "From", first.Format("2006-01-02 15:04"), "To", last.Add(rg.step).Format("2006-01-02 15:04"))
		vm.Desc = lc.N("RunsChartDescSlots", total, "Range", lc.T(rg.text))
	}
	for i := 0; i <= chartTicks; i++ {
		v := step * i
		y := baseY - float64(v)*scale
		vm.Ticks = append(vm.Ticks, views.ChartTick{Y: num(y), LabelX: num(chartLeft - 6), LabelY: num(y + 4), Label: strconv.Itoa(v)})
	}
	slot := plotW / float64(days)
	barW := slot * 0.62
	for i := range days {
		d := first.Add(time.Duration(i) * rg.step)
		c := day[i]
		x := chartLeft + float64(i)*slot
		failed := c.Failed + c.Timeout
		hs, hf := float64(c.Success)*scale, float64(failed)*scale
		when := lc.Weekday(d.Weekday()) + " " + d.Format(time.DateOnly)
		if rg.unit != master.SlotDay {
			when = d.Format("2006-01-02 15:04") + "–" + d.Add(rg.step).Format("15:04")
		}
		cd := views.ChartDay{
			Day: d.Format(layout), Counts: c,
			Tooltip: lc.N("RunsChartTooltip", c.Total, "Day", when,
				"Success", c.Success, "Failed", c.Failed, "Timeout", c.Timeout, "Skipped", c.Skipped),
			Hit:    views.ChartRect{X: num(x), Y: num(chartTop), W: num(slot), H: num(plotH), Draw: true},
			LabelX: num(x + slot/2), LabelY: num(baseY + 18),
		}
		if (days-1-i)%rg.every == 0 {
			cd.Label = d.Format(rg.label)
		}
		bx := x + (slot-barW)/2
		if c.Success > 0 {
			cd.Success = views.ChartRect{X: num(bx), Y: num(baseY - hs), W: num(barW), H: num(hs), Draw: true}
		}
		if failed > 0 {
			cd.Failed = views.ChartRect{X: num(bx), Y: num(baseY - hs - hf), W: num(barW), H: num(hf), Draw: true}
		}
		vm.Days = append(vm.Days, cd)
	}
	return vm
}

// niceStep is the smallest round step (1, 2, 3, 4, 5, 6 or 8 times a power
// of ten) such that ticks steps reach peak; at least 1.
func niceStep(peak, ticks int) int {
	for mag := 1; ; mag *= 10 {
		for _, m := range []int{1, 2, 3, 4, 5, 6, 8} {
			if s := m * mag; s*ticks >= peak {
				return s
			}
		}
	}
}

// num writes a coordinate with at most one decimal.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}
