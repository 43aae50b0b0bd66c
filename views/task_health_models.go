package views

// TaskHealthVM is the health card of a task page: how its last runs went.
type TaskHealthVM struct {
	Window  int // how many latest runs were read
	Runs    int // of them, how many ran (skipped ones left out)
	Skipped int
	// Rate is the success rate ("96%"), P50 and P95 the durations ("1.2s");
	// all "" when no run ran.
	Rate, P50, P95 string
	// RunsText says what the rate is of: "48 of 50 runs succeeded".
	RunsText string
	// Failing: the latest runs failed in a row, FailingText says how many.
	Failing     bool
	FailingText string
	Chart       DurationChartVM
}

// DurationChartVM is the duration chart of a task's last runs, drawn on the
// server: one bar per run, oldest at the left, failed runs marked.
type DurationChartVM struct {
	ViewBox string
	Title   string
	Desc    string
	AxisX1  string
	AxisX2  string
	AxisY   string
	Ticks   []ChartTick
	Bars    []DurationBar
	// Lines are the p50 and p95 levels.
	Lines []DurationLine
	// OldestX, NewestX and LabelY place the ends' labels under the axis.
	OldestX, NewestX, LabelY string
}

// DurationBar is one run of the chart: its duration bar, a transparent hit
// area for the tooltip and the link, and a mark above a failed run.
type DurationBar struct {
	RunID   string
	Result  string
	Tooltip string
	Fill    string
	Hit     ChartRect
	Bar     ChartRect
	// Failed runs get a mark at (MarkX, MarkY), seen however short the bar.
	Failed       bool
	MarkX, MarkY string
}

// DurationLine is a horizontal level of the chart (p50, p95) with its label.
type DurationLine struct {
	Class          string
	Y              string
	LabelX, LabelY string
	Label          string
	Dash           string
}
