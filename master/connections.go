package master

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Connections is the connection domain: the named connections tasks of
// the types beyond HTTP and shell reach their systems through, defined
// once per project by its owners (or for every project by a cluster
// admin), their sealed secrets, what workers are sent of them, and Test.
type Connections struct{ m *Master }

// Connections is the engine's connection domain.
func (m *Master) Connections() *Connections { return m.connections }

// TargetConnection is the event log's target type of connections.
const TargetConnection = "connection"

// maxConnDescription bounds a connection's description.
const maxConnDescription = 1000

// Connection is a connection as the engine answers it: its secret is
// protocol.SecretMask when it has one, never the value.
type Connection struct {
	ID string `json:"id"`
	// Project is the project's name; "" with AllProjects.
	Project     string `json:"project,omitempty"`
	ProjectID   int64  `json:"project_id"`
	AllProjects bool   `json:"all_projects"`
	protocol.ConnectionSpec
	Description string    `json:"description,omitempty"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ConnectionInput is a connection to save. Project names its project (the
// default project when empty), unless AllProjects makes it one for every
// project (cluster admins only); an edit keeps the project it has. Secret
// protocol.SecretMask on an edit keeps the stored secret; Version, on an
// edit, is the one it started from (0: any).
type ConnectionInput struct {
	protocol.ConnectionSpec
	Project     string `json:"project,omitempty"`
	AllProjects bool   `json:"all_projects,omitempty"`
	Description string `json:"description,omitempty"`
}

// ConnectionTest is what Test answers: the worker that tried and what it
// found.
type ConnectionTest struct {
	Node string `json:"node"`
	protocol.ConnectionTestResponse
}

func connectionNotFound(id string) error {
	return Errorf(KindNotFound, "connection %s does not exist", id)
}

// authorizeConn checks whoever asks may do a to connections of project
// (0: every project's, which only cluster admins change).
func authorizeConn(ctx context.Context, project int64, a Action, notFound error) error {
	if project == 0 {
		if a == ActRead {
			return nil // every signed-in user may pick them in a task
		}
		return requireClusterAdmin(ctx)
	}
	return authorize(ctx, project, a, notFound)
}

// connectionOf is the answer form of a stored connection.
func connectionOf(r *store.Connection, project string) *Connection {
	c := &Connection{ID: r.ID, Project: project, ProjectID: r.ProjectID, AllProjects: r.ProjectID == 0, Description: r.Description,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	c.ConnectionSpec = protocol.ConnectionSpec{Name: r.Name, Kind: r.Kind, Address: r.Address, Database: r.Database, User: r.User, Version: r.Version}
	if r.SecretEnc != "" || r.HasSecret {
		c.Secret = protocol.SecretMask
	}
	if r.TLS != "" && r.TLS != "{}" && r.TLS != "null" {
		var t protocol.ConnectionTLS
		if json.Unmarshal([]byte(r.TLS), &t) == nil {
			c.TLS = &t
		}
	}
	if r.Options != "" && r.Options != "{}" {
		_ = json.Unmarshal([]byte(r.Options), &c.Options)
	}
	return c
}

// List returns the connections whoever asks may read: those of the
// projects they read and those for every project; project, when not
// empty, narrows it to that project's (and those for every project).
func (cn *Connections) List(ctx context.Context, project string) ([]Connection, error) {
	var projects []int64
	if project != "" {
		p, err := cn.m.projects.project(ctx, project)
		if err != nil {
			return nil, err
		}
		if err := authorize(ctx, p.ID, ActRead, projectNotFound(p.Name)); err != nil {
			return nil, err
		}
		projects = []int64{0, p.ID}
	} else if readable := readableProjects(ctx); readable != nil {
		projects = append([]int64{0}, readable...)
	}
	rows, err := store.ListConnections(ctx, cn.m.st.DB, projects)
	if err != nil {
		return nil, err
	}
	names, err := cn.m.projects.Names(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Connection, 0, len(rows))
	for i := range rows {
		out = append(out, *connectionOf(&rows[i], names[rows[i].ProjectID]))
	}
	return out, nil
}

// get reads connection id if whoever asks may do a to it.
func (cn *Connections) get(ctx context.Context, id string, a Action) (*store.Connection, error) {
	if !utf8.ValidString(id) || len(id) > 64 {
		return nil, connectionNotFound("?")
	}
	r, err := store.GetConnection(ctx, cn.m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, connectionNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorizeConn(ctx, r.ProjectID, a, connectionNotFound(id)); err != nil {
		return nil, err
	}
	return r, nil
}

// Get returns one connection.
func (cn *Connections) Get(ctx context.Context, id string) (*Connection, error) {
	r, err := cn.get(ctx, id, ActRead)
	if err != nil {
		return nil, err
	}
	return cn.answer(ctx, r)
}

func (cn *Connections) answer(ctx context.Context, r *store.Connection) (*Connection, error) {
	name := ""
	if r.ProjectID != 0 {
		p, err := cn.m.projects.projectByID(ctx, r.ProjectID)
		if err != nil {
			return nil, err
		}
		name = p.Name
	}
	return connectionOf(r, name), nil
}

// check validates in and returns the row to store (secret not sealed yet).
func (cn *Connections) check(in *ConnectionInput) (*store.Connection, error) {
	in.Normalize()
	in.Version = 0
	err := in.ConnectionSpec.Validate()
	fe := protocol.FieldErrors{}
	if err != nil && !errors.As(err, &fe) {
		return nil, err
	}
	if fe == nil {
		fe = protocol.FieldErrors{}
	}
	in.Description = strings.TrimSpace(in.Description)
	switch {
	case utf8.RuneCountInString(in.Description) > maxConnDescription:
		fe["description"] = fmt.Sprintf("is longer than %d characters", maxConnDescription)
	case !utf8.ValidString(in.Description) || strings.ContainsRune(in.Description, 0):
		fe["description"] = "holds a NUL byte or invalid UTF-8"
	}
	if len(fe) > 0 {
		return nil, fe
	}
	tlsJSON, options := "{}", "{}"
	if in.TLS != nil {
		b, _ := json.Marshal(in.TLS)
		tlsJSON = string(b)
	}
	if len(in.Options) > 0 {
		b, _ := json.Marshal(in.Options)
		options = string(b)
	}
	return &store.Connection{Name: in.Name, Kind: in.Kind, Address: in.Address, Database: in.Database, User: in.User,
		TLS: tlsJSON, Options: options, Description: in.Description}, nil
}

// Create validates and stores a new connection.
func (cn *Connections) Create(ctx context.Context, in ConnectionInput) (_ *Connection, err error) {
	id := uuid.NewString()
	defer func() {
		target := id
		if err != nil {
			target = ""
		}
		cn.m.events.record(ctx, "connection.create", TargetConnection, target, err, in.Kind+" “"+in.Name+"”")
	}()
	var project int64
	if !in.AllProjects {
		p, err := cn.m.projects.project(ctx, strings.TrimSpace(in.Project))
		if err != nil {
			return nil, err
		}
		project = p.ID
		ctx = withEventProject(ctx, p.ID)
		if err := authorize(ctx, p.ID, ActManage, projectNotFound(p.Name)); err != nil {
			return nil, err
		}
	} else if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	if in.Secret == protocol.SecretMask {
		return nil, protocol.FieldErrors{"secret": "type the secret itself (the mask stands for a stored one only on an edit)"}
	}
	row, err := cn.check(&in)
	if err != nil {
		return nil, err
	}
	row.ID, row.ProjectID, row.CreatedBy = id, project, ActorFrom(ctx)
	if row.SecretEnc, err = sealSecret(cn.m.cfg.ClusterKey, id, in.Secret); err != nil {
		return nil, err
	}
	if err := store.CreateConnection(ctx, cn.m.st.DB, row); err != nil {
		return nil, cn.mapErr(err, in.Name)
	}
	return cn.answer(ctx, row)
}

func (cn *Connections) mapErr(err error, name string) error {
	switch {
	case errors.Is(err, store.ErrDuplicate):
		return protocol.FieldErrors{"name": fmt.Sprintf("%q is taken: its project (or every project) has a connection of that name", name)}
	case errors.Is(err, store.ErrConflict):
		return &Error{Kind: KindState, Err: ErrVersionMoved, Msg: fmt.Sprintf("connection %q changed meanwhile; reload it and make your change again", name)}
	}
	return err
}

// Update replaces a connection's definition. The tasks using it are sent
// again to their running executors, with the new definition.
func (cn *Connections) Update(ctx context.Context, id string, in ConnectionInput, version int64) (_ *Connection, err error) {
	defer func() {
		cn.m.events.record(ctx, "connection.update", TargetConnection, id, err, in.Kind+" “"+in.Name+"”")
	}()
	cur, err := cn.get(ctx, id, ActManage)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, cur.ProjectID)
	if version != 0 && version != cur.Version {
		return nil, cn.mapErr(store.ErrConflict, cur.Name)
	}
	secret := in.Secret
	row, err := cn.check(&in)
	if err != nil {
		return nil, err
	}
	users, err := cn.usedBy(ctx, cur)
	if err != nil {
		return nil, err
	}
	if len(users) > 0 && (row.Name != cur.Name || row.Kind != cur.Kind) {
		return nil, protocol.FieldErrors{"name": fmt.Sprintf("%d task(s) use this connection by its name and kind (%s): "+
			"keep both, or point them at another connection first", len(users), taskList(users))}
	}
	row.ID, row.ProjectID, row.CreatedBy, row.CreatedAt = cur.ID, cur.ProjectID, cur.CreatedBy, cur.CreatedAt
	switch secret {
	case protocol.SecretMask:
		row.SecretEnc = cur.SecretEnc
	default:
		if row.SecretEnc, err = sealSecret(cn.m.cfg.ClusterKey, id, secret); err != nil {
			return nil, err
		}
	}
	if err := store.UpdateConnection(ctx, cn.m.st.DB, row, cur.Version); err != nil {
		return nil, cn.mapErr(err, cur.Name)
	}
	cn.resend(ctx, users)
	return cn.answer(ctx, row)
}

// Delete deletes a connection no task uses.
func (cn *Connections) Delete(ctx context.Context, id string) (err error) {
	defer func() { cn.m.events.record(ctx, "connection.delete", TargetConnection, id, err, "") }()
	cur, err := cn.get(ctx, id, ActManage)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, cur.ProjectID)
	users, err := cn.usedBy(ctx, cur)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return Errorf(KindState, "connection %q is used by %d task(s) (%s): point them at another connection or delete them first",
			cur.Name, len(users), taskList(users))
	}
	return cn.mapErr(store.DeleteConnection(ctx, cn.m.st.DB, id, cur.Version), cur.Name)
}

// usedBy returns the tasks (not deleted) that use connection c: those of
// its project naming it, or for a connection of every project, those of
// any project naming it that has no connection of its own by that name.
func (cn *Connections) usedBy(ctx context.Context, c *store.Connection) ([]*Task, error) {
	ids, err := store.TasksUsingConnection(ctx, cn.m.st.DB, c.ProjectID, c.Name)
	if err != nil {
		return nil, err
	}
	rows, err := store.GetTasks(ctx, cn.m.st.DB, ids)
	if err != nil {
		return nil, err
	}
	var out []*Task
	own := map[int64]bool{} // projects with a connection of their own by that name
	for _, id := range ids {
		row, ok := rows[id]
		if !ok {
			continue // deleted meanwhile
		}
		t, err := decodeTask(row)
		if err != nil {
			continue // a bad stored definition uses nothing
		}
		if t.ConnectionName() != c.Name {
			continue
		}
		if c.ProjectID == 0 && t.ProjectID != 0 {
			has, seen := own[t.ProjectID]
			if !seen {
				named, err := store.ConnectionsNamed(ctx, cn.m.st.DB, t.ProjectID, []string{c.Name})
				if err != nil {
					return nil, err
				}
				has = named[c.Name] != nil && named[c.Name].ProjectID != 0
				own[t.ProjectID] = has
			}
			if has {
				continue
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// taskList names at most five tasks, for refusals.
func taskList(ts []*Task) string {
	var names []string
	for i, t := range ts {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(ts)-5))
			break
		}
		names = append(names, fmt.Sprintf("%q", t.Title))
	}
	return strings.Join(names, ", ")
}

// resend sends the scheduled tasks of ts again to their running executors,
// so their workers use the connection as it is now. A worker that cannot be
// reached gets it at its next push; it is logged, not refused: the
// connection is saved.
func (cn *Connections) resend(ctx context.Context, ts []*Task) {
	for _, t := range ts {
		if t.Status != store.TaskRunning && t.Status != store.TaskPaused {
			continue
		}
		if err := cn.m.tasks.switchLive(ctx, t, t); err != nil {
			cn.m.log.Warn("send a task again after its connection changed", "task", t.ID, "err", err)
		}
	}
}

// Test asks a running worker (node, or the first running one the
// connection's project may use when empty) to try the connection.
func (cn *Connections) Test(ctx context.Context, id, node string) (_ *ConnectionTest, err error) {
	defer func() { cn.m.events.record(ctx, "connection.test", TargetConnection, id, err, node) }()
	cur, err := cn.get(ctx, id, ActEdit)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, cur.ProjectID)
	spec, err := cn.spec(cur)
	if err != nil {
		return nil, err
	}
	n, err := cn.testNode(ctx, cur.ProjectID, node)
	if err != nil {
		return nil, err
	}
	var res protocol.ConnectionTestResponse
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cn.m.client.call(tctx, n, "POST", protocol.PathConnectionTest, map[string]string{protocol.HeaderSecret: n.Secret},
		protocol.ConnectionTestRequest{Connection: *spec}, &res); err != nil {
		return nil, wrapf(KindWorker, err, "node %s could not test the connection: %s", n.Name, Message(err))
	}
	return &ConnectionTest{Node: n.Name, ConnectionTestResponse: res}, nil
}

// testNode is the worker a test runs on: node when named (a running worker
// the project may use), else the first such one by name.
func (cn *Connections) testNode(ctx context.Context, project int64, node string) (*store.Node, error) {
	nodes, err := store.ListNodesByStatus(ctx, cn.m.st.DB, store.StatusRunning)
	if err != nil {
		return nil, err
	}
	var rule *poolRule
	if project != 0 {
		p, err := cn.m.projects.projectByID(ctx, project)
		if err != nil {
			return nil, err
		}
		rule = poolRuleOf(p)
	}
	slices.SortFunc(nodes, func(a, b store.Node) int { return strings.Compare(a.Name, b.Name) })
	for i := range nodes {
		n := &nodes[i]
		if n.Type != store.TypeWorker || (node != "" && n.Name != node) {
			continue
		}
		if rule != nil && !rule.all && !rule.admits(NodeLabels(n)) {
			if node != "" {
				return nil, protocol.FieldErrors{"node": fmt.Sprintf("node %s is not in a pool this connection's project may use (%s)", node, rule.names())}
			}
			continue
		}
		return n, nil
	}
	if node != "" {
		return nil, protocol.FieldErrors{"node": fmt.Sprintf("node %q is not a running worker", node)}
	}
	return nil, Errorf(KindState, "no running worker to test the connection on: start one (with --allow-types for its task type)")
}

// spec is what a worker is sent of c: its definition, secret opened.
func (cn *Connections) spec(c *store.Connection) (*protocol.ConnectionSpec, error) {
	out := connectionOf(c, "").ConnectionSpec
	secret, err := openSecret(cn.m.cfg.ClusterKey, c.ID, c.SecretEnc)
	if err != nil {
		return nil, Errorf(KindState, "connection %q: %s", c.Name, err)
	}
	out.Secret = secret
	return &out, nil
}

// attach gives each spec whose task's type uses a connection that
// connection, as the task's project sees it (its own, else the one for
// every project). A connection that is not defined, or whose secret cannot
// be opened, is left out: the run fails and says so, and it is logged.
func (cn *Connections) attach(ctx context.Context, specs []protocol.TaskSpec) {
	byProject := map[int64][]int{}
	for i := range specs {
		if specs[i].Connection == nil && specs[i].ConnectionName() != "" {
			byProject[specs[i].ProjectID] = append(byProject[specs[i].ProjectID], i)
		}
	}
	for project, idx := range byProject {
		var names []string
		for _, i := range idx {
			names = append(names, specs[i].ConnectionName())
		}
		found, err := store.ConnectionsNamed(ctx, cn.m.st.DB, cmp.Or(project, store.DefaultProjectID), dedupe(names))
		if err != nil {
			cn.m.log.Error("load the connections of tasks sent to a worker", "err", err)
			continue
		}
		specsOf := map[string]*protocol.ConnectionSpec{}
		for _, i := range idx {
			name := specs[i].ConnectionName()
			c := found[name]
			if c == nil {
				cn.m.log.Warn("task names a connection that is not defined", "task", specs[i].ID, "connection", name)
				continue
			}
			if !slices.Contains(protocol.ConnectionKindsOf(specs[i].Type), c.Kind) {
				cn.m.log.Warn("task names a connection of another kind", "task", specs[i].ID, "connection", name, "kind", c.Kind)
				continue
			}
			s, ok := specsOf[name]
			if !ok {
				if s, err = cn.spec(c); err != nil {
					cn.m.log.Error("open a connection's secret", "connection", name, "err", err)
				}
				specsOf[name] = s
			}
			specs[i].Connection = s
		}
	}
}

// checkTaskConnection records in fe what is wrong with the connection a
// task of project names: not defined, or of a kind its type cannot use.
func (cn *Connections) checkTaskConnection(ctx context.Context, fe protocol.FieldErrors, project int64, def *protocol.TaskDef) error {
	s := def.Spec()
	if s == nil || s.Conn() == "" {
		return nil
	}
	field := def.Type + ".connection"
	if fe[field] != "" {
		return nil
	}
	found, err := store.ConnectionsNamed(ctx, cn.m.st.DB, cmp.Or(project, store.DefaultProjectID), []string{s.Conn()})
	if err != nil {
		return err
	}
	c := found[s.Conn()]
	kinds := protocol.ConnectionKindsOf(def.Type)
	switch {
	case c == nil:
		fe[field] = fmt.Sprintf("no connection named %q in this project (nor for every project): define it first", s.Conn())
	case !slices.Contains(kinds, c.Kind):
		fe[field] = fmt.Sprintf("%q is a %s connection: a %s task needs a %s one", s.Conn(), c.Kind, def.Type, strings.Join(kinds, " or "))
	}
	return nil
}

// TypeRunners says, for a task type, which running workers run it (asked
// at once, each within the health timeout): the names of those that do,
// and of those that could not say (down, or older). HTTP runs everywhere.
type TypeRunners struct {
	Type    string   `json:"type"`
	Run     []string `json:"run"`
	Unknown []string `json:"unknown,omitempty"`
	Refuse  []string `json:"refuse,omitempty"`
}

// Runners asks the running workers whether they run tasks of typ, for the
// task form ("which workers can run this type").
func (cn *Connections) Runners(ctx context.Context, typ string) (*TypeRunners, error) {
	if !slices.Contains(protocol.TaskTypes(), typ) {
		return nil, protocol.FieldErrors{"type": fmt.Sprintf("%q is not one of %s", typ, strings.Join(protocol.TaskTypes(), ", "))}
	}
	nodes, err := store.ListNodesByStatus(ctx, cn.m.st.DB, store.StatusRunning)
	if err != nil {
		return nil, err
	}
	workers := nodes[:0]
	for _, n := range nodes {
		if n.Type == store.TypeWorker {
			workers = append(workers, n)
		}
	}
	if len(workers) > 200 {
		workers = workers[:200] // a form's hint, not an inventory
	}
	health := cn.m.tasks.healthOf(ctx, workers)
	out := &TypeRunners{Type: typ, Run: []string{}}
	for _, n := range workers {
		switch typeAllowed(health[n.Name], typ) {
		case runsType:
			out.Run = append(out.Run, n.Name)
		case runsUnknown:
			out.Unknown = append(out.Unknown, n.Name)
		default:
			out.Refuse = append(out.Refuse, n.Name)
		}
	}
	slices.Sort(out.Run)
	slices.Sort(out.Unknown)
	slices.Sort(out.Refuse)
	return out, nil
}
