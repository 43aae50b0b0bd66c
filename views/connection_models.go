package views

import (
	"context"
	"strconv"
)

// AllProjectsValue is the project select's value of a connection for every
// project (cluster admins).
const AllProjectsValue = "*"

// ConnectionRow is one line of the connections list.
type ConnectionRow struct {
	ID, Name, Kind, Address, User string
	// Project is its project's name; AllProjects: it is one for every
	// project ("" Project).
	Project     string
	AllProjects bool
	SecretSet   bool
	// Updated is its last change, UTC.
	Updated string
}

// ConnectionsVM is the connections list.
type ConnectionsVM struct {
	Layout LayoutVM
	Flash  *Flash
	Rows   []ConnectionRow
	// Project filters the list ("" every project one reads); Projects are
	// its choices.
	Project  string
	Projects []string
	// CanCreate: the user may define connections in the current project
	// (or is a cluster admin).
	CanCreate bool
}

// ConnectionFields are the connection form's values as typed.
type ConnectionFields struct {
	// Project is a project's name or AllProjectsValue.
	Project                             string
	Name, Kind, Address, Database, User string
	// Secret is what the password input shows: empty, or on an edit the
	// mask standing for the stored secret (kept unless changed).
	Secret                  string
	TLSEnabled, TLSInsecure bool
	TLSCA, TLSServerName    string
	Options                 string // key=value lines
	Description             string
	Version                 string // an edit's version (hidden)
}

// ConnectionFormVM is the new and edit connection form.
type ConnectionFormVM struct {
	Layout LayoutVM
	Edit   bool
	ID     string
	ConnectionFields
	// Projects are those the user may define connections in;
	// CanAllProjects: may define one for every project (cluster admins).
	// On an edit the project stays (Project names it).
	Projects       []string
	CanAllProjects bool
	// SecretRetype: a refused form does not send a typed secret back: it
	// must be typed again.
	SecretRetype bool
	Errors       map[string]string
	OtherErrors  []string
	FormError    string
}

// ConnectionTestVM is a connection test's outcome, in the connection's
// page.
type ConnectionTestVM struct {
	OK         bool
	Node       string
	Message    string
	DurationMS int64
	// Error is why the test could not be made (no worker, refused).
	Error string
}

// Text is the outcome's sentence: "OK in 12 ms on w1: NATS 2.10".
func (vm ConnectionTestVM) Text(ctx context.Context) string {
	if vm.Error != "" {
		return vm.Error
	}
	id := "ConnTestFailed"
	if vm.OK {
		id = "ConnTestOK"
	}
	return T(ctx, id, "MS", strconv.FormatInt(vm.DurationMS, 10), "Node", vm.Node, "Message", vm.Message)
}

// ConnectionVM is a connection's page.
type ConnectionVM struct {
	Layout LayoutVM
	Flash  *Flash
	ConnectionRow
	Database, Description string
	// TLS: TLS is on; the other TLS settings only matter then.
	TLS, TLSInsecure bool
	TLSServerName    string
	TLSCA            bool // a CA bundle is set
	Options          []KV
	CreatedBy        string
	Created          string
	Version          int64
	// UsedBy are the tasks that use it, as far as the user reads them.
	UsedBy []TaskLink
	// Nodes are the running workers a test may run on.
	Nodes []string
	// CanTest: the user may test it (editors); CanManage: edit and delete
	// it (owners; cluster admins for one of every project).
	CanTest, CanManage bool
	// Test is a test's outcome when the page answers one (without htmx).
	Test *ConnectionTestVM
}

// connProjectText names where a connection is defined.
func connProjectText(ctx context.Context, r ConnectionRow) string {
	if r.AllProjects {
		return T(ctx, "ConnAllProjects")
	}
	return r.Project
}
