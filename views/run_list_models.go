package views

// RunFilterVM is the filter form of the runs page, as typed.
type RunFilterVM struct {
	Result string
	Node   string
	Task   string // task id
	Since  string // datetime-local, UTC
	Until  string // datetime-local, UTC
}

// RunListRow is one line of the runs page: a run and its task.
type RunListRow struct {
	RunRow
	TaskID    string
	TaskTitle string // "" when the task is gone
	// DelayedID names the delayed task of a run of one, by its Topic and
	// ContentKey.
	DelayedID    string
	DelayedTopic string
	DelayedKey   string
}

// RunListVM is the runs page across every task.
type RunListVM struct {
	Layout   LayoutVM
	Filter   RunFilterVM
	Filtered bool
	Errors   map[string]string // field -> message, for the filter form
	Results  []string          // the result filter's choices
	Nodes    []string          // the node filter's choices
	Tasks    []TaskLink        // the task filter's suggestions
	Live     RunListLiveVM
}

// RunListLiveVM is the live part of the runs page: the page of runs, its
// counts and pager. It polls itself and is replaced whole.
type RunListLiveVM struct {
	Rows     []RunListRow
	Total    int
	Capped   bool // there are at least Total runs; they were not all counted
	From, To int
	// PrevURL and NextURL are the neighbour pages, "" at the ends; their
	// Live* twins are the fragments htmx swaps in.
	PrevURL, NextURL         string
	PrevLiveURL, NextLiveURL string
	RowsURL                  string // this fragment, for the poll
	PollInterval             string
	UpdatedAt                string
	Filtered                 bool
}
