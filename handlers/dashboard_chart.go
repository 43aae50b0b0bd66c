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

// runsChart lays out days bars from the first UTC day: success at the bottom,
// failed and timed out stacked on top, with a value axis of round numbers.
func runsChart(lc *locale.Localizer, first time.Time, days int, counts []master.DayCount) views.ChartVM {
	byDay := map[string]*views.RunCounts{}
	for _, dc := range counts {
		c := byDay[dc.Day]
		if c == nil {
			c = &views.RunCounts{}
			byDay[dc.Day] = c
		}
		addCount(c, dc.Result, dc.N)
	}
	plotW, plotH := chartW-chartLeft-chartRight, chartH-chartTop-chartBottom
	baseY := chartTop + plotH
	day := make([]views.RunCounts, days)
	peak, total := 0, 0
	for i := range days {
		if c := byDay[first.AddDate(0, 0, i).Format(time.DateOnly)]; c != nil {
			day[i] = *c
		}
		peak = max(peak, day[i].Success+day[i].Failed+day[i].Timeout)
		total += day[i].Total
	}
	step := niceStep(peak, chartTicks)
	top := step * chartTicks
	scale := plotH / float64(top)
	last := first.AddDate(0, 0, days-1)
	vm := views.ChartVM{
		ViewBox: "0 0 " + num(chartW) + " " + num(chartH), Width: num(chartW), Height: num(chartH),
		Title:  lc.T("RunsChartTitle", "From", first.Format(time.DateOnly), "To", last.Format(time.DateOnly)),
		Desc:   lc.N("RunsChartDesc", total, "Days", days),
		AxisX1: num(chartLeft), AxisX2: num(chartW - chartRight), AxisY: num(baseY),
		MaxValue: top, Empty: total == 0,
	}
	for i := 0; i <= chartTicks; i++ {
		v := step * i
		y := baseY - float64(v)*scale
		vm.Ticks = append(vm.Ticks, views.ChartTick{Y: num(y), LabelX: num(chartLeft - 6), LabelY: num(y + 4), Label: strconv.Itoa(v)})
	}
	slot := plotW / float64(days)
	barW := slot * 0.62
	for i := range days {
		d := first.AddDate(0, 0, i)
		c := day[i]
		x := chartLeft + float64(i)*slot
		failed := c.Failed + c.Timeout
		hs, hf := float64(c.Success)*scale, float64(failed)*scale
		cd := views.ChartDay{
			Day: d.Format(time.DateOnly), Label: d.Format("01-02"), Counts: c,
			Tooltip: lc.N("RunsChartTooltip", c.Total, "Day", lc.Weekday(d.Weekday())+" "+d.Format(time.DateOnly),
				"Success", c.Success, "Failed", c.Failed, "Timeout", c.Timeout, "Skipped", c.Skipped),
			Hit:    views.ChartRect{X: num(x), Y: num(chartTop), W: num(slot), H: num(plotH), Draw: true},
			LabelX: num(x + slot/2), LabelY: num(baseY + 18),
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
