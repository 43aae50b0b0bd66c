package views

// TaskVersionsVM is a task's history: its kept versions, newest first.
type TaskVersionsVM struct {
	Layout LayoutVM
	Flash  *Flash
	ID     string
	Title  string
	Items  []TaskVersionRow
	// Kept is how many versions of a task are kept (the setting).
	Kept int
	// OlderURL is the page of the versions older than these; "" on the last.
	OlderURL string
}

// TaskVersionRow is one version in the history.
type TaskVersionRow struct {
	Version   int
	SavedAt   string
	SavedBy   string
	Via       string
	Note      string
	Current   bool
	ViewURL   string
	DiffURL   string // against the version before it; "" for the first
	RestoreAt string // the restore form's action; "" when not offered
}

// TaskVersionVM is one version: who saved it and what changed from
// another version (the one before it, or the one asked for).
type TaskVersionVM struct {
	Layout     LayoutVM
	ID         string
	Title      string
	Version    TaskVersionRow
	From       int // the version compared with; 0: none
	Changes    []FieldChangeRow
	Definition string // the saved definition as JSON, secrets masked
}

// FieldChangeRow is one field that differs.
type FieldChangeRow struct {
	Field  string
	From   string
	To     string
	Secret bool
}
