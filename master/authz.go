package master

import (
	"context"
	"slices"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// ProjectRole is a user's role in one project.
type ProjectRole string

// Roles in a project, from most to least powerful. Each may do what the
// ones below it may.
const (
	// ProjectOwner manages the project's members and settings.
	ProjectOwner ProjectRole = "owner"
	// ProjectEditor creates, edits and deletes tasks and delayed tasks.
	ProjectEditor ProjectRole = "editor"
	// ProjectOperator starts, stops, runs, kills and cancels, and edits nothing.
	ProjectOperator ProjectRole = "operator"
	// ProjectViewer reads; secrets stay masked.
	ProjectViewer ProjectRole = "viewer"
)

// ProjectRoles lists the roles of a project, most powerful first.
var ProjectRoles = []ProjectRole{ProjectOwner, ProjectEditor, ProjectOperator, ProjectViewer}

// rank orders roles: a higher rank may do all a lower one may; 0 is none.
func (r ProjectRole) rank() int {
	switch r {
	case ProjectOwner:
		return 4
	case ProjectEditor:
		return 3
	case ProjectOperator:
		return 2
	case ProjectViewer:
		return 1
	}
	return 0
}

// Valid reports whether r is one of ProjectRoles.
func (r ProjectRole) Valid() bool { return r.rank() > 0 }

// minRole returns the less powerful of a and b.
func minRole(a, b ProjectRole) ProjectRole {
	if a.rank() < b.rank() {
		return a
	}
	return b
}

// maxRole returns the more powerful of a and b.
func maxRole(a, b ProjectRole) ProjectRole {
	if a.rank() > b.rank() {
		return a
	}
	return b
}

// Action is something a person does to a project's objects or to the
// cluster; RoleActions says who may.
type Action string

// Actions, checked by the engine on every call that reads or changes a
// project's objects or the cluster.
const (
	// ActRead reads tasks, delayed tasks, runs and events of a project.
	ActRead Action = "read"
	// ActOperate starts, stops, pauses, resumes and runs tasks, kills runs
	// and cancels delayed tasks.
	ActOperate Action = "operate"
	// ActEdit creates, edits, clones and deletes tasks and delayed tasks,
	// and applies configuration documents.
	ActEdit Action = "edit"
	// ActReadSecrets sees the secrets of task definitions (headers, bodies,
	// environment) unmasked.
	ActReadSecrets Action = "read-secrets"
	// ActManage manages a project's members and its tokens.
	ActManage Action = "manage"
)

// RoleActions is the one table of what each project role may do. The
// console hides what a role may not do, the API and the CLI are refused it,
// and README's "Teams and sign-on" shows it; cluster admins may do
// everything in every project, plus the cluster actions (nodes, pools,
// users, settings, projects).
var RoleActions = map[ProjectRole][]Action{
	ProjectOwner:    {ActRead, ActOperate, ActEdit, ActReadSecrets, ActManage},
	ProjectEditor:   {ActRead, ActOperate, ActEdit, ActReadSecrets},
	ProjectOperator: {ActRead, ActOperate},
	ProjectViewer:   {ActRead},
}

// Allows reports whether the role may do a.
func (r ProjectRole) Allows(a Action) bool { return slices.Contains(RoleActions[r], a) }

// RoleNone is the cluster role of a user who acts only through project
// memberships.
const RoleNone = store.RoleNone

// ClusterAdmin reports whether p may do the cluster's actions (nodes, pools,
// users, settings, projects) and everything in every project. A cluster
// admin acting through a token scoped to a project is not one.
func (p *Principal) ClusterAdmin() bool {
	return p != nil && p.Role == RoleAdmin && p.TokenProject == 0
}

// RoleIn returns p's role in the project now ("" for none): a cluster admin
// is its owner, a user whose cluster role is viewer (the role from before
// projects) its viewer at least, a member has its membership's role; a
// token caps this to its project and its role.
func (p *Principal) RoleIn(project int64) ProjectRole {
	if p == nil {
		return ""
	}
	var r ProjectRole
	switch p.Role {
	case RoleAdmin:
		r = ProjectOwner
	case RoleViewer:
		r = ProjectViewer
	}
	r = maxRole(r, p.Memberships[project])
	if p.Token != "" {
		if p.TokenProject != 0 && p.TokenProject != project {
			return ""
		}
		if p.TokenRole != "" {
			r = minRole(r, p.TokenRole)
		}
	}
	return r
}

// Can reports whether p may do a in the project.
func (p *Principal) Can(project int64, a Action) bool { return p.RoleIn(project).Allows(a) }

// CanAnywhere reports whether p may do a in some project.
func (p *Principal) CanAnywhere(a Action) bool {
	if p == nil || p.RoleIn(p.TokenProject).Allows(a) {
		return true
	}
	for id := range p.Memberships {
		if p.Can(id, a) {
			return true
		}
	}
	return false
}

// ReadableProjects returns the ids of the projects p may read, nil when it
// may read every project (a cluster admin or a viewer of all).
func (p *Principal) ReadableProjects() []int64 {
	if p == nil {
		return nil
	}
	if p.TokenProject != 0 {
		if p.Can(p.TokenProject, ActRead) {
			return []int64{p.TokenProject}
		}
		return []int64{}
	}
	if p.Role == RoleAdmin || p.Role == RoleViewer {
		return nil
	}
	out := []int64{}
	for id := range p.Memberships {
		if p.Can(id, ActRead) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

type principalKey struct{}

// WithPrincipal returns a context that says who is asking; the engine
// authorizes every call made with it (and names p in the event log). A
// context without one is the system's own (the engine's duties, the CLI on
// the database): it may do everything.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return WithActor(context.WithValue(ctx, principalKey{}, p), p.Actor())
}

// PrincipalFrom returns who is asking, nil for the system.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// authorize checks that whoever asks in ctx may do a in the project. One
// who may not even read it is told missing (notFound), exactly as for an
// object that does not exist, so no one learns what other projects hold;
// one who may read but not do a is refused with a sentence naming the role.
func authorize(ctx context.Context, project int64, a Action, notFound error) error {
	p := PrincipalFrom(ctx)
	if p == nil {
		return nil
	}
	r := p.RoleIn(project)
	if !r.Allows(ActRead) {
		return notFound
	}
	if !r.Allows(a) {
		return Errorf(KindForbidden, "forbidden: your role in this project (%s) may not %s", r, actionVerb[a])
	}
	return nil
}

// actionVerb says what an action does, for refusals.
var actionVerb = map[Action]string{
	ActRead:        "read it",
	ActOperate:     "start, stop, run, kill or cancel",
	ActEdit:        "create, change or delete tasks and delayed tasks",
	ActReadSecrets: "see secrets",
	ActManage:      "manage members or tokens",
}

// requireClusterAdmin refuses anyone but a cluster admin (and the system).
func requireClusterAdmin(ctx context.Context) error {
	if p := PrincipalFrom(ctx); p != nil && !p.ClusterAdmin() {
		return Errorf(KindForbidden, "forbidden: only a cluster admin may change nodes, pools, users, settings or projects")
	}
	return nil
}

// restrictProjects limits a list's projects (nil: every one) to those whoever
// asks in ctx may read.
func restrictProjects(ctx context.Context, want []int64) []int64 {
	readable := readableProjects(ctx)
	switch {
	case readable == nil:
		return want
	case want == nil:
		return readable
	}
	out := []int64{}
	for _, id := range want {
		if slices.Contains(readable, id) {
			out = append(out, id)
		}
	}
	return out
}

// mayListUsers reports whether p may read other users' accounts: cluster
// admins and viewers of every project (as before projects).
func mayListUsers(p *Principal) bool {
	return p == nil || ((p.Role == RoleAdmin || p.Role == RoleViewer) && p.TokenProject == 0)
}

// readableProjects returns the projects whoever asks in ctx may read (nil: all).
func readableProjects(ctx context.Context) []int64 {
	return PrincipalFrom(ctx).ReadableProjects()
}
