// Package views holds the templ components of the console: the layout, the
// pages and the fragments htmx swaps. View models are plain structs.
package views

// LayoutVM is what every page's frame needs.
type LayoutVM struct {
	Title  string
	User   string
	Role   string
	Active string // nav entry: "nodes", "tokens"
	// ReadOnly: the user may not edit in the current project; CanOperate:
	// may start, stop, run, kill and cancel there.
	ReadOnly   bool
	CanOperate bool
	// Admin: a cluster admin; ClusterReader: may see users and settings.
	Admin         bool
	ClusterReader bool
	// Project is the current project, ProjectRole the user's role in it,
	// Projects those the user may switch to.
	Project     string
	ProjectRole string
	Projects    []string
	// Back is the page's path, where a project switch returns.
	Back string
	// Here is where the language switch returns: the page itself for a
	// GET, else the list it belongs to.
	Here string
}

// Flash is a one-line outcome of an action.
type Flash struct {
	OK      bool
	Message string
}

// NodeRow is one line of the nodes table.
type NodeRow struct {
	Name           string
	Type           string
	Host           string
	Protocol       string
	Status         int
	StatusName     string
	Priority       int
	MaxConcurrency int
	LastSeen       string // relative, e.g. "3s ago"
	LastSeenAt     string // RFC 3339, for the title
	// Failures is the failed health checks in a row; for a node the checks
	// took offline, the count that did (the stored counter restarts at 0).
	Failures      string
	FailuresTitle string
	Mode          string
	Reason        string
	// Degraded: the node answers but is degraded (Reason says why).
	Degraded bool
	// ClockSkew says how far the node's clock is off the master's when it
	// is beyond the limit ("its clock is 3.2 s ahead of the master's");
	// empty otherwise.
	ClockSkew string
	// Leader marks the master holding the cluster lease.
	Leader     bool
	CanConnect bool
	CanEnable  bool
	CanDisable bool
	CanDelete  bool
	CanEdit    bool
	// CanResetIdentity: an auto worker bound to a node key.
	CanResetIdentity bool
	// CanApprove: a self-registered name waiting for an admin's approval.
	CanApprove bool
}

// NodesVM is the nodes page.
type NodesVM struct {
	Layout       LayoutVM
	Rows         []NodeRow
	Flash        *Flash
	Counts       [3]int // workers: offline, idle, running
	Masters      int
	AutoCommand  string // worker command line for auto-registration
	PollInterval string // htmx trigger, e.g. "every 2s"
	ShowActions  bool
	// Offset, Total and PageSize page the rows; the counters count all nodes.
	Offset, Total, PageSize int
}

// NodeFormVM is the add/edit node form.
type NodeFormVM struct {
	Layout LayoutVM
	Edit   bool
	NodeFields
	Errors    map[string]string
	FormError string
	Command   string // exact worker command line for this node
}

// NodeFields are the node form's values as typed.
type NodeFields struct {
	Name           string
	Protocol       string
	Host           string
	Priority       string
	MaxConcurrency string
}

// LoginVM is the login page.
type LoginVM struct {
	Username string
	Error    string
	Next     string
	// OIDCName is the identity provider's name on the "Sign in with" button; "": no button.
	OIDCName string
}

// TokenRow is one API token.
type TokenRow struct {
	ID        int64
	Name      string
	CreatedBy string
	CreatedAt string
	LastUsed  string
	Expires   string // "never" or a UTC time
	Expired   bool
	Revoked   bool
	Project   string // "" for a cluster token
	Role      string // "" for its owner's role
}

// TokensVM is the API tokens page.
type TokensVM struct {
	Layout   LayoutVM
	Tokens   []TokenRow
	NewToken string // shown once, right after creation
	Flash    *Flash
	Error    string
	Name     string
	// ExpiresAt and ExpiresError are the form's expiry field and its error.
	ExpiresAt    string
	ExpiresError string
	// Roles are the project roles a token may be capped to.
	Roles []string
}

// ErrorVM is a full-page error.
type ErrorVM struct {
	Layout  LayoutVM
	Status  int
	Message string
	// BackURL and BackLabel lead back to where the user came from.
	BackURL   string
	BackLabel string
}

// ProjectRow is one line of the projects table.
type ProjectRow struct {
	Name, Description, Pools, Role string
}

// ProjectFormVM is what the new-project form holds.
type ProjectFormVM struct {
	Name, Description, Pools string
}

// ProjectsVM is the projects page.
type ProjectsVM struct {
	Layout LayoutVM
	Flash  *Flash
	Rows   []ProjectRow
	Form   ProjectFormVM
	Errors map[string]string
}

// MemberRow is one member of a project.
type MemberRow struct {
	Username, Role, AddedBy string
}

// ProjectPageVM is one project's page.
type ProjectPageVM struct {
	Layout      LayoutVM
	Flash       *Flash
	Name        string
	Description string
	Pools       string // one per line
	WebhookURL  string // masked
	Members     []MemberRow
	Roles       []string
	CanManage   bool
	Errors      map[string]string
	MemberError string
}
