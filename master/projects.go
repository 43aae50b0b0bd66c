package master

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Project is a team's space as the engine shows it.
type Project = store.Project

// DefaultProject is the name of the project everything from before projects
// belongs to, and of the project a task or a token that names none goes to.
const DefaultProject = "default"

// AllPools is the pool allowance that allows every node (the default
// project's, so nothing that ran before projects stops).
const AllPools = "*"

// projectName is the rule for project names: lower case, so the unique key
// is case-insensitive on every database, and usable in a URL as it is.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckProjectName returns what is wrong with a project name, or "".
func CheckProjectName(name string) string {
	if !projectName.MatchString(name) {
		return "must be 1 to 63 characters: lower-case letters, digits and '-', starting with a letter or digit"
	}
	return ""
}

// MaxProjectPools bounds the pools one project may be allowed.
const MaxProjectPools = 32

// ProjectInput is a new project or the new settings of one.
type ProjectInput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Pools are the label selectors the project's tasks may run on ("*":
	// every node); only a cluster admin sets them.
	Pools []string `json:"pools"`
	// WebhookURL receives the project's run failures, besides the
	// cluster's webhook.
	WebhookURL string `json:"webhook_url,omitempty"`
}

// checkWebhook returns what is wrong with an optional absolute http(s) URL
// (a webhook, the console's public URL), or "".
func checkWebhook(raw string) string {
	if raw == "" {
		return ""
	}
	if len(raw) > maxWebhookURL {
		return fmt.Sprintf("is longer than %d bytes", maxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(raw, " \t\r\n") {
		return fmt.Sprintf("%q is not an absolute http(s) URL", raw)
	}
	return ""
}

// checkPools validates and normalizes a pool allowance.
func checkPools(pools []string) ([]string, string) {
	if len(pools) > MaxProjectPools {
		return nil, fmt.Sprintf("at most %d pools", MaxProjectPools)
	}
	out := []string{}
	for _, p := range pools {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p == AllPools {
			out = append(out, p)
			continue
		}
		sel, err := protocol.ParseSelector(p)
		if err != nil {
			return nil, fmt.Sprintf("pool %q: %v", p, err)
		}
		if sel.Empty() {
			return nil, fmt.Sprintf("pool %q selects nothing", p)
		}
		out = append(out, sel.String())
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if n := len(strings.Join(out, "\n")); n > maxPoolsText {
		return nil, fmt.Sprintf("the pools take %d bytes together: at most %d", n, maxPoolsText)
	}
	return out, ""
}

// maxPoolsText is the room of projects.pools (the selectors, one a line).
const maxPoolsText = 4000

// maxWebhookURL is the room of projects.webhook_url.
const maxWebhookURL = 2048

// ProjectPools returns a project's pool allowance, one selector each.
func ProjectPools(p *Project) []string {
	out := []string{}
	for _, l := range strings.Split(p.Pools, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// projectNotFound is the answer about a project one may not see, the same
// as about one that does not exist.
func projectNotFound(name string) error {
	return Errorf(KindNotFound, "project %s not found", name)
}

// List returns the projects whoever asks may read, by name.
func (pj *Projects) List(ctx context.Context) ([]Project, error) {
	ps, err := store.ListProjects(ctx, pj.m.st.DB)
	if err != nil {
		return nil, err
	}
	readable := readableProjects(ctx)
	if readable == nil {
		return ps, nil
	}
	return slices.DeleteFunc(ps, func(p Project) bool { return !slices.Contains(readable, p.ID) }), nil
}

// Get returns a project whoever asks may read; any other is
// KindNotFound.
func (pj *Projects) Get(ctx context.Context, name string) (*Project, error) {
	p, err := pj.project(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, p.ID, ActRead, projectNotFound(name)); err != nil {
		return nil, err
	}
	return p, nil
}

// project reads a project by name ("" is the default project) without
// authorizing: a missing one is KindNotFound.
func (pj *Projects) project(ctx context.Context, name string) (*Project, error) {
	return projectNamed(ctx, pj.m.st.DB, name)
}

// projectNamed reads a project by name ("" is the default project).
func projectNamed(ctx context.Context, db bun.IDB, name string) (*Project, error) {
	if name == "" {
		name = DefaultProject
	}
	p, err := store.GetProject(ctx, db, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, projectNotFound(name)
	}
	return p, err
}

// projectByID reads a project by id without authorizing.
func (pj *Projects) projectByID(ctx context.Context, id int64) (*Project, error) {
	p, err := store.GetProjectByID(ctx, pj.m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(KindNotFound, "project %d not found", id)
	}
	return p, err
}

// Names maps project ids to names, for lists that show them.
func (pj *Projects) Names(ctx context.Context) (map[int64]string, error) {
	return store.ProjectNames(ctx, pj.m.st.DB)
}

// Create creates a project; only a cluster admin may.
func (pj *Projects) Create(ctx context.Context, in ProjectInput) (_ *Project, err error) {
	in.Name = strings.TrimSpace(in.Name)
	defer func() { pj.m.events.record(ctx, "project.create", store.TargetProject, in.Name, err, "") }()
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	fe := protocol.FieldErrors{}
	if msg := CheckProjectName(in.Name); msg != "" {
		fe["name"] = msg
	}
	if msg := checkText(in.Description, 1000); msg != "" {
		fe["description"] = msg
	}
	pools, msg := checkPools(in.Pools)
	if msg != "" {
		fe["pools"] = msg
	}
	in.WebhookURL = strings.TrimSpace(in.WebhookURL)
	if msg := checkWebhook(in.WebhookURL); msg != "" {
		fe["webhook_url"] = msg
	} else if msg := pj.m.notify.guard.checkURL(ctx, in.WebhookURL); in.WebhookURL != "" && msg != "" {
		fe["webhook_url"] = msg
	}
	if len(fe) > 0 {
		return nil, invalidFields(fe)
	}
	p := &Project{Name: in.Name, Description: strings.TrimSpace(in.Description), Pools: strings.Join(pools, "\n"), CreatedBy: ActorFrom(ctx),
		WebhookURL: in.WebhookURL}
	if err := store.CreateProject(ctx, pj.m.st.DB, p); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			return nil, Errorf(KindDuplicate, "a project named %s exists already", in.Name)
		}
		return nil, err
	}
	return p, nil
}

// ProjectPatch changes a project: its description (owners and cluster
// admins) and its pools (cluster admins only). Nil fields stay.
type ProjectPatch struct {
	Description *string  `json:"description,omitempty"`
	Pools       []string `json:"pools,omitempty"`
	// WebhookURL: "" removes it; the masked form shown keeps it.
	WebhookURL *string `json:"webhook_url,omitempty"`
}

// Update changes a project's settings.
func (pj *Projects) Update(ctx context.Context, name string, patch ProjectPatch) (_ *Project, err error) {
	defer func() { pj.m.events.record(ctx, "project.update", store.TargetProject, name, err, "") }()
	p, err := pj.project(ctx, name)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, p.ID)
	if err := authorize(ctx, p.ID, ActManage, projectNotFound(name)); err != nil {
		return nil, err
	}
	fe := protocol.FieldErrors{}
	if patch.Description != nil {
		if msg := checkText(*patch.Description, 1000); msg != "" {
			fe["description"] = msg
		}
		p.Description = strings.TrimSpace(*patch.Description)
	}
	if patch.WebhookURL != nil {
		w := strings.TrimSpace(*patch.WebhookURL)
		if w != MaskURL(p.WebhookURL) || w == "" { // the mask shown keeps the stored URL
			if msg := checkWebhook(w); msg != "" {
				fe["webhook_url"] = msg
			} else if msg := pj.m.notify.guard.checkURL(ctx, w); w != "" && msg != "" {
				fe["webhook_url"] = msg
			}
			p.WebhookURL = w
		}
	}
	if patch.Pools != nil {
		if err := requireClusterAdmin(ctx); err != nil {
			return nil, Errorf(KindForbidden, "forbidden: only a cluster admin may change the pools a project may run on")
		}
		pools, msg := checkPools(patch.Pools)
		if msg != "" {
			fe["pools"] = msg
		}
		p.Pools = strings.Join(pools, "\n")
	}
	if len(fe) > 0 {
		return nil, invalidFields(fe)
	}
	if err := store.UpdateProject(ctx, pj.m.st.DB, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Delete deletes an empty project; only a cluster admin may, and the
// default project stays.
func (pj *Projects) Delete(ctx context.Context, name string) (err error) {
	defer func() { pj.m.events.record(ctx, "project.delete", store.TargetProject, name, err, "") }()
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	p, err := pj.project(ctx, name)
	if err != nil {
		return err
	}
	if p.ID == store.DefaultProjectID {
		return Errorf(KindState, "the default project cannot be deleted")
	}
	if err := store.DeleteProject(ctx, pj.m.st.DB, p.ID); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return Errorf(KindState, "project %s still has tasks, delayed tasks or API tokens; delete or move them first", name)
		}
		return err
	}
	return nil
}

// ProjectMember is a member of a project and its role.
type ProjectMember = store.ProjectMember

// Members returns a project's members.
func (pj *Projects) Members(ctx context.Context, name string) ([]ProjectMember, error) {
	p, err := pj.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return store.ProjectMembers(ctx, pj.m.st.DB, p.ID)
}

// SetMember gives a user a role in a project (owners and cluster
// admins). The user must exist; an external user's memberships are set by
// its identity provider's groups at every sign-in, when that provider maps
// groups to projects.
func (pj *Projects) SetMember(ctx context.Context, project, username string, role ProjectRole) (err error) {
	defer func() {
		pj.m.events.record(ctx, "project.member", store.TargetProject, project, err, fmt.Sprintf("%s: %s", username, role))
	}()
	p, err := pj.project(ctx, project)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, p.ID)
	if err := authorize(ctx, p.ID, ActManage, projectNotFound(project)); err != nil {
		return err
	}
	if !role.Valid() {
		return invalidFields(protocol.FieldErrors{"role": fmt.Sprintf("must be one of owner, editor, operator, viewer, not %q", role)})
	}
	u, err := store.GetUser(ctx, pj.m.st.DB, username)
	if errors.Is(err, store.ErrNotFound) {
		return invalidFields(protocol.FieldErrors{"username": fmt.Sprintf("no user named %q", username)})
	}
	if err != nil {
		return err
	}
	return store.SetProjectMember(ctx, pj.m.st.DB, &store.ProjectMember{ProjectID: p.ID, Username: u.Username, Role: string(role), AddedBy: ActorFrom(ctx)})
}

// RemoveMember ends a user's membership of a project.
func (pj *Projects) RemoveMember(ctx context.Context, project, username string) (err error) {
	defer func() {
		pj.m.events.record(ctx, "project.member", store.TargetProject, project, err, username+": removed")
	}()
	p, err := pj.project(ctx, project)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, p.ID)
	if err := authorize(ctx, p.ID, ActManage, projectNotFound(project)); err != nil {
		return err
	}
	if err := store.RemoveProjectMember(ctx, pj.m.st.DB, p.ID, username); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Errorf(KindNotFound, "%s is not a member of project %s", username, project)
		}
		return err
	}
	return nil
}

// poolRule is a project's pool allowance, ready to check nodes and
// selectors against.
type poolRule struct {
	project string
	all     bool
	pools   []string
	allowed []protocol.Selector
}

// poolRuleOf reads p's pool allowance.
func poolRuleOf(p *Project) *poolRule {
	r := &poolRule{project: p.Name, pools: ProjectPools(p)}
	r.all = slices.Contains(r.pools, AllPools)
	for _, s := range r.pools {
		if sel, err := protocol.ParseSelector(s); err == nil {
			r.allowed = append(r.allowed, sel)
		}
	}
	return r
}

// names says which pools the project may run on, for refusals.
func (r *poolRule) names() string {
	if len(r.pools) == 0 {
		return "no pool: a cluster admin has allowed it none"
	}
	return "pools " + strings.Join(r.pools, "; ")
}

// admits reports whether a node with these labels is in an allowed pool.
func (r *poolRule) admits(labels protocol.Labels) bool {
	return r.all || slices.ContainsFunc(r.allowed, func(a protocol.Selector) bool { return a.Matches(labels) })
}

// check puts into fe what of a selector and named executors (nodes by name)
// falls outside the allowed pools: every node the selector can select and
// every named node must be in one of them.
func (r *poolRule) check(fe protocol.FieldErrors, selector string, executors []string, byName map[string]store.Node) {
	if r.all {
		return
	}
	if s := strings.TrimSpace(selector); s != "" && fe["selector"] == "" {
		if sel, err := protocol.ParseSelector(s); err == nil && !slices.ContainsFunc(r.allowed, func(a protocol.Selector) bool { return sel.Implies(a) }) {
			fe["selector"] = fmt.Sprintf("selector %s may select workers outside what project %s may run on (%s); add one of those pools' requirements to the selector, or ask a cluster admin to allow the pool", sel.String(), r.project, r.names())
		}
	}
	if fe["executors"] != "" {
		return
	}
	for _, name := range executors {
		n, ok := byName[name]
		if ok && !r.admits(NodeLabels(&n)) {
			fe["executors"] = fmt.Sprintf("node %s is outside what project %s may run on (%s)", name, r.project, r.names())
			return
		}
	}
}

type eventProjectKey struct{}

// withEventProject returns a context whose events belong to the project
// (0: the cluster).
func withEventProject(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, eventProjectKey{}, id)
}

// eventProjectFrom returns the project the events of ctx belong to.
func eventProjectFrom(ctx context.Context) int64 {
	id, _ := ctx.Value(eventProjectKey{}).(int64)
	return id
}

// invalidFields is the refusal of input with bad fields, naming each.
func invalidFields(fe protocol.FieldErrors) error {
	parts := make([]string, 0, len(fe))
	for f, msg := range fe {
		parts = append(parts, f+": "+msg)
	}
	slices.Sort(parts)
	return &Error{Kind: KindInvalid, Msg: strings.Join(parts, "; "), Fields: fe}
}

// checkText returns what is wrong with a free text of at most max
// characters, or "".
func checkText(s string, max int) string {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "must be valid UTF-8 without NUL"
	}
	if utf8.RuneCountInString(s) > max {
		return fmt.Sprintf("at most %d characters", max)
	}
	return ""
}
