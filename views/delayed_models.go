package views

// DelayedRow is one line of the delayed task list.
type DelayedRow struct {
	ID         string
	SourceApp  string
	Topic      string
	ContentKey string
	Due        string // "2026-05-01 12:00:00 UTC"
	DueISO     string // the same, RFC 3339
	DueRel     string // "in 3m", "2m ago"
	Status     string
	Late       bool
	LateBy     string // "2m3s" when late
	Attempts   string // "1 of 3"
	Node       string
	CanCancel  bool
}

// DelayedFilterVM is the filter form of the delayed task list, as typed.
type DelayedFilterVM struct {
	Status    string
	Topic     string
	SourceApp string
}

// DelayedListVM is the delayed task list page.
type DelayedListVM struct {
	Layout       LayoutVM
	Flash        *Flash
	Rows         []DelayedRow
	Filter       DelayedFilterVM
	Filtered     bool
	Statuses     []string
	Counts       []DelayedCount
	Total        int
	From, To     int
	PrevURL      string
	NextURL      string
	RowsURL      string // the live fragment with the same filters
	ActionQuery  string // the filters, kept on action posts
	PollInterval string
	ShowActions  bool
}

// DelayedCount is how many delayed tasks have one status.
type DelayedCount struct {
	Status string
	N      int
}

// DelayedVM is the page of one delayed task.
type DelayedVM struct {
	Layout      LayoutVM
	Flash       *Flash
	ID          string
	Status      string
	SourceApp   string
	Topic       string
	ContentKey  string
	Due         string
	Late        bool
	LateBy      string
	NextAt      string // pending: when it is sent next
	NotifyURL   string
	ContentType string
	NotifyBody  string
	Retries     int
	Attempts    int
	Executors   string
	Selector    string
	Keepers     string
	Node        string
	LastError   string
	CreatedBy   string
	Created     string
	Fired       string
	Finished    string
	CanCancel   bool
	Live        DelayedLiveVM
}

// DelayedLiveVM is the live part of a delayed task's page: its status and runs.
type DelayedLiveVM struct {
	ID           string
	Status       string
	Attempts     int
	Runs         RunsVM
	LiveURL      string
	PollInterval string
}

// DelayedFormVM is the create form of a delayed task, as typed.
type DelayedFormVM struct {
	Layout LayoutVM
	DelayedFields
	Executors   []NodeOption
	Errors      map[string]string
	OtherErrors []string
	FormError   string
}

// DelayedFields are the delayed task form's values as typed.
type DelayedFields struct {
	SourceApp   string
	Topic       string
	ContentKey  string
	Delay       string
	At          string
	NotifyURL   string
	ContentType string
	NotifyBody  string
	Retries     string
	Keepers     string
	Selector    string
}
