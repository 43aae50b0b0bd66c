package handlers

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Geometry of the node health chart, in SVG user units.
const (
	healthW      = 720.0
	healthH      = 200.0
	healthLeft   = 52.0
	healthRight  = 12.0
	healthTop    = 30.0 // the failures' band is above the plot
	healthBand   = 14.0 // y of the failures' band
	healthBottom = 26.0
	healthTicks  = 4
	// healthMinSpan is the narrowest time axis: a young history is drawn
	// over ten minutes rather than stretched over its few seconds.
	healthMinSpan = 10 * time.Minute
	// healthMaxDots: up to this many successful checks each get a dot with
	// its numbers; past it the line alone keeps the live page light.
	healthMaxDots = 120
)

// healthChart lays out a node's health samples (oldest first) from the first
// one to now: the latency of successful probes as a line, failed probes as
// red dots in a band above it with a faint red rule down the plot (their
// latency is mostly the timeout, which would flatten the line).
func healthChart(lc *locale.Localizer, samples []master.HealthSample, now time.Time) (views.HealthChartVM, views.NodeHealthSummary) {
	sum := views.NodeHealthSummary{Samples: len(samples), P50: "-", Max: "-", Since: "-"}
	var okMS []int64
	for _, s := range samples {
		if s.OK {
			okMS = append(okMS, s.LatencyMS)
		} else {
			sum.Failures++
		}
	}
	peak := int64(0)
	if len(okMS) > 0 {
		sorted := slices.Clone(okMS)
		slices.Sort(sorted)
		sum.P50 = durationMS(lc, sorted[(len(sorted)-1)/2])
		peak = sorted[len(sorted)-1]
		sum.Max = durationMS(lc, peak)
	}
	plotW, plotH := healthW-healthLeft-healthRight, healthH-healthTop-healthBottom
	baseY := healthTop + plotH
	start := now.Add(-healthMinSpan)
	if len(samples) > 0 {
		sum.Since = utcText(samples[0].At)
		if samples[0].At.Before(start) {
			start = samples[0].At
		}
	}
	span := now.Sub(start)
	step := niceStep(int(peak), healthTicks)
	top := float64(step * healthTicks)
	x := func(t time.Time) float64 {
		return healthLeft + plotW*float64(t.Sub(start))/float64(span)
	}
	y := func(ms int64) float64 { return baseY - plotH*float64(ms)/top }
	vm := views.HealthChartVM{
		ViewBox: "0 0 " + num(healthW) + " " + num(healthH), Width: num(healthW), Height: num(healthH),
		Title:  lc.T("HealthChartTitle", "Since", start.UTC().Format("2006-01-02 15:04")+" UTC"),
		Desc:   lc.T("HealthChartDesc", "Checks", len(samples), "Failed", sum.Failures),
		AxisX1: num(healthLeft), AxisX2: num(healthW - healthRight), AxisY: num(baseY), Empty: len(samples) == 0,
	}
	for i := 0; i <= healthTicks; i++ {
		v := step * i
		ty := baseY - float64(v)*plotH/top
		vm.YTicks = append(vm.YTicks, views.HealthTick{X: num(healthLeft - 6), Y: num(ty + 4), Label: strconv.Itoa(v) + "ms",
			LineX1: num(healthLeft), LineX2: num(healthW - healthRight), LineY: num(ty)})
	}
	for i := 0; i <= 4; i++ {
		t := start.Add(span * time.Duration(i) / 4)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		vm.XTicks = append(vm.XTicks, views.HealthTick{X: num(x(t)), Y: num(baseY + 18), Label: t.UTC().Format("15:04"), Anchor: anchor})
	}
	vm.BandY, vm.BandLabelX, vm.BandLabelY = num(healthBand), num(healthLeft-6), num(healthBand+4)
	vm.PlotTop, vm.PlotBottom = num(healthTop), num(baseY)
	var line []string
	for _, s := range samples {
		p := views.HealthPoint{X: num(x(s.At)), At: utcText(s.At), Latency: durationMS(lc, s.LatencyMS), OK: s.OK, Reason: s.Reason}
		if s.OK {
			p.Y = num(y(s.LatencyMS))
			line = append(line, p.X+","+p.Y)
			if len(okMS) <= healthMaxDots {
				vm.Points = append(vm.Points, p)
			}
		} else {
			p.Y = num(healthBand)
			vm.Failures = append(vm.Failures, p)
		}
	}
	if len(line) > 1 {
		vm.Line = strings.Join(line, " ")
	}
	return vm, sum
}
