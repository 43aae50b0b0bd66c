package views

// NodeTaskRow is one task a node executes.
type NodeTaskRow struct {
	ID         string
	Title      string
	Schedule   string
	StatusName string
	LastResult string
	LastRun    string
}

// HealthPoint is one plotted health sample.
type HealthPoint struct {
	X, Y    string // SVG coordinates
	At      string // UTC
	Latency string // "12ms"
	OK      bool
	Reason  string
}

// HealthTick is one label of an axis of the health chart.
type HealthTick struct {
	X, Y   string
	Label  string
	Anchor string // text-anchor of an x label
	LineX1 string
	LineX2 string
	LineY  string
}

// HealthChartVM is the node page's chart of probe latency over time, failures
// marked on it.
type HealthChartVM struct {
	ViewBox, Width, Height string
	Title, Desc            string
	Line                   string // polyline points of the successful probes' latency
	Points                 []HealthPoint
	Failures               []HealthPoint
	YTicks                 []HealthTick
	XTicks                 []HealthTick
	AxisX1, AxisX2, AxisY  string
	// The failures' band above the plot and the plot's vertical extent.
	BandY, BandLabelX, BandLabelY string
	PlotTop, PlotBottom           string
	Empty                         bool
}

// NodeHealthSummary sums up the samples the chart shows.
type NodeHealthSummary struct {
	Samples  int
	Failures int
	P50      string
	Max      string
	Since    string // UTC
}

// NodePageVM is the page of one node.
type NodePageVM struct {
	Layout      LayoutVM
	Name        string
	ShowActions bool
	CanEdit     bool
	// CanApprove: the node waits for an admin's approval.
	CanApprove bool
	// CanLabel: a worker, whose admin labels may be set.
	CanLabel bool
	// LabelsForm is the admin labels field ("k=v, k=v"), as stored or as
	// typed; LabelsError what is wrong with what was typed.
	LabelsForm  string
	LabelsError string
	Flash       *Flash
	Live        NodeLiveVM
}

// NodeLabelRow is one of a node's labels in force.
type NodeLabelRow struct {
	Key, Value string
	// From is "worker" (declared with --labels), "admin" (set here) or
	// "pending" (declared, waiting for an admin's approval: in no pool).
	From string
	// Overrides is the worker's own "key=value" an admin label replaces.
	Overrides string
}

// NodeLiveVM is the live part of the node page: its state, tasks, recent
// runs and health history. It polls itself and is replaced whole.
type NodeLiveVM struct {
	Name           string
	Type           string
	Mode           string
	Host           string
	StatusName     string
	Leader         bool
	Priority       int
	MaxConcurrency int
	LastSeen       string
	LastSeenAt     string
	Failures       int
	Reason         string
	// Degraded: the node answers but is degraded (Reason says why).
	Degraded bool
	// ClockSkew says how far the node's clock is off the master's when it
	// is beyond the limit; empty otherwise.
	ClockSkew   string
	MachineName string
	// Labels are its labels in force, by key.
	Labels       []NodeLabelRow
	Tasks        []NodeTaskRow
	Runs         []RunListRow
	RunsURL      string // the runs page filtered by this node
	Chart        HealthChartVM
	Health       NodeHealthSummary
	RowsURL      string
	PollInterval string
	UpdatedAt    string
}
