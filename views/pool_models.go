package views

// PoolsVM is the Pools page: the pools one label key forms.
type PoolsVM struct {
	Layout LayoutVM
	Flash  *Flash
	// Key is the label key the pools are grouped by; Keys the keys the
	// workers carry, offered by the chooser.
	Key  string
	Keys []string
	// KeyError says why Key is refused.
	KeyError    string
	Pools       []PoolVM
	ShowActions bool
}

// PoolPageVM is the page of one pool.
type PoolPageVM struct {
	Layout      LayoutVM
	Flash       *Flash
	ShowActions bool
	Pool        PoolVM
}

// PoolVM is one pool: the workers carrying key=value and the tasks that
// select them.
type PoolVM struct {
	Key, Value string
	Label      string // key=value
	URL        string // its page
	Approved   bool
	Running    int
	Members    []PoolMemberRow
	Tasks      []PoolTaskRow
	// Runs and Failed count the members' runs over the last Window ("10m").
	Runs, Failed int
	Window       string
	// Events are members joining and leaving, newest first.
	Events []PoolEventRow
}

// PoolMemberRow is one worker of a pool.
type PoolMemberRow struct {
	Name, StatusName, Reason string
	Runs, Failed             int
}

// PoolTaskRow is a task that selects a pool.
type PoolTaskRow struct {
	ID, Title, Selector, StatusName string
}

// PoolEventRow is a member joining or leaving.
type PoolEventRow struct {
	At    string // UTC
	AtISO string // RFC 3339
	Ago   string
	Node  string
	// Action is the event ("node.offline"), What it in words ("went
	// offline"), Meaning its colour (good, warn, bad, info).
	Action, What, Meaning string
	Actor, Detail         string
}
