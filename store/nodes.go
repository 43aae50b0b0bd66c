package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// NodeStatus is a node's status column. The type lives here, with the column,
// because store, master and handlers all need it and store imports none of them;
// which actions each status allows is the engine's rule (master.NodeActions).
// The JSON API shows it as its number.
type NodeStatus int

// Node status values, as in ScheduleMaster.
const (
	StatusOffline NodeStatus = 0
	StatusIdle    NodeStatus = 1
	StatusRunning NodeStatus = 2
)

// NodeStatuses lists every node status, in order.
var NodeStatuses = []NodeStatus{StatusOffline, StatusIdle, StatusRunning}

// String names the status for messages and badges.
func (s NodeStatus) String() string {
	switch s {
	case StatusOffline:
		return "offline"
	case StatusIdle:
		return "idle"
	case StatusRunning:
		return "running"
	}
	return fmt.Sprintf("status %d", int(s))
}

// Node types and registration modes.
const (
	TypeMaster = "master"
	TypeWorker = "worker"
	ModeAuto   = "auto"
	ModeManual = "manual"
	// ModePending is a self-registered name waiting for an admin's approval
	// (setting approve_new_nodes): offline, with no secret, never an executor.
	ModePending = "pending"
)

// Node is a master or worker known to the cluster.
type Node struct {
	bun.BaseModel `bun:"table:nodes"`

	ID          int64      `bun:"id,pk,autoincrement"`
	Name        string     `bun:"name"`
	Type        string     `bun:"type"`
	MachineName string     `bun:"machine_name"`
	Protocol    string     `bun:"protocol"`
	Host        string     `bun:"host"`
	Secret      string     `bun:"secret"`
	Status      NodeStatus `bun:"status"`
	// DesiredStatus is what an admin or the registration last asked for; the health
	// checker uses it to bring a recovered node back to where it was.
	DesiredStatus  NodeStatus `bun:"desired_status"`
	Priority       int        `bun:"priority"`
	MaxConcurrency int        `bun:"max_concurrency"`
	LastSeen       time.Time  `bun:"last_seen,nullzero"`
	// DownSince is, for a node that stopped running, since when it is down:
	// its last successful probe when the health checks took it offline,
	// else the moment it stopped. Zero while it runs (or never stopped).
	DownSince time.Time `bun:"down_since,nullzero"`
	Failures  int       `bun:"failures"`
	BootID    string    `bun:"boot_id"`
	Mode      string    `bun:"mode"`
	Reason    string    `bun:"reason"`
	// NodeKey is the hex Ed25519 public key an auto node proved on its first
	// registration; empty until then, for manual nodes and after Reset identity.
	NodeKey string `bun:"node_key"`
	// Labels are the labels the worker declares (--labels), a JSON object,
	// replaced at every registration and health probe; AdminLabels are the
	// labels an admin set on the node, which win over the worker's.
	Labels      string `bun:"labels"`
	AdminLabels string `bun:"admin_labels"`
	// ApprovedLabels are the declared labels that may select the node (a
	// JSON object): with approval on, a label the worker declares later
	// waits for an admin. "" (NULL) means all of Labels (nodes from before).
	ApprovedLabels string `bun:"approved_labels,nullzero"`
	// ClockSkewMS is how far the node's clock was from the master's at its
	// last registration or health probe, in milliseconds (positive: ahead);
	// nil until measured and for nodes that do not send their time.
	ClockSkewMS sql.NullInt64 `bun:"clock_skew_ms"`
	CreatedAt   time.Time     `bun:"created_at"`
	UpdatedAt   time.Time     `bun:"updated_at"`
}

// ListNodes returns every node, the master first, then by name.
func ListNodes(ctx context.Context, db bun.IDB) ([]Node, error) {
	var nodes []Node
	err := db.NewSelect().Model(&nodes).OrderExpr("type ASC, name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list nodes: %w", err)
	}
	return nodes, nil
}

// ListNodesByStatus returns the nodes whose status is one of statuses.
func ListNodesByStatus(ctx context.Context, db bun.IDB, statuses ...NodeStatus) ([]Node, error) {
	var nodes []Node
	err := db.NewSelect().Model(&nodes).Where("status IN (?)", bun.In(statuses)).OrderExpr("name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list nodes by status: %w", err)
	}
	return nodes, nil
}

// GetNode returns the node called name or ErrNotFound.
func GetNode(ctx context.Context, db bun.IDB, name string) (*Node, error) {
	n := new(Node)
	err := db.NewSelect().Model(n).Where("name = ?", name).Limit(1).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get node %q: %w", name, notFound(err))
	}
	return n, nil
}

// GetNodeFold returns the node whose name equals name ignoring case (names
// are ASCII and unique case-insensitively), or ErrNotFound.
func GetNodeFold(ctx context.Context, db bun.IDB, name string) (*Node, error) {
	n := new(Node)
	err := db.NewSelect().Model(n).Where("LOWER(name) = LOWER(?)", name).Limit(1).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get node %q: %w", name, notFound(err))
	}
	return n, nil
}

// CreateNode inserts n; a taken name gives ErrDuplicate.
func CreateNode(ctx context.Context, db bun.IDB, n *Node) error {
	now := time.Now().UTC()
	n.CreatedAt, n.UpdatedAt = now, now
	n.Labels, n.AdminLabels = cmp.Or(n.Labels, "{}"), cmp.Or(n.AdminLabels, "{}")
	err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(n).Exec(ctx)
		return err
	})
	if err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: node %q: %w", n.Name, ErrDuplicate)
		}
		return fmt.Errorf("store: create node: %w", err)
	}
	return nil
}

// NodeConfig is the part of a node an admin may edit in any state.
type NodeConfig struct {
	Protocol       string
	Host           string
	Priority       int
	MaxConcurrency int
}

// UpdateNodeConfig persists an edit of protocol, host, priority and max concurrency.
func UpdateNodeConfig(ctx context.Context, db bun.IDB, name string, c NodeConfig) error {
	res, err := db.NewUpdate().Model((*Node)(nil)).
		Set("protocol = ?", c.Protocol).Set("host = ?", c.Host).
		Set("priority = ?", c.Priority).Set("max_concurrency = ?", c.MaxConcurrency).
		Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: node %q: %w", name, ErrNotFound)
		}
		return fmt.Errorf("store: update node: %w", err)
	}
	return nil
}

// DeleteNode removes a node that is not running, with its fire claims. A running node
// gives ErrConflict, an unknown one ErrNotFound.
func DeleteNode(ctx context.Context, db bun.IDB, name string) error {
	res, err := db.NewDelete().Model((*Node)(nil)).
		Where("name = ?", name).Where("status <> ?", StatusRunning).Where("type = ?", TypeWorker).Exec(ctx)
	if err := affected(res, err); err != nil {
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: delete node: %w", err)
		}
		if _, gerr := GetNode(ctx, db, name); gerr != nil {
			return gerr
		}
		return fmt.Errorf("store: delete node %q: %w", name, ErrConflict)
	}
	return ReleaseClaims(ctx, db, name)
}

// Transition describes one conditional status change.
type Transition struct {
	From []NodeStatus
	To   NodeStatus
	// Optional fields set together with the status.
	Secret        *string
	BootID        *string
	DesiredStatus *NodeStatus
	Reason        *string
	// Seen sets last_seen and clears the failure counter.
	Seen time.Time
	// IfBootID, when set, also requires the stored boot id to equal it.
	IfBootID *string
	// Fence, when set, makes the change a leader's write: it happens only while
	// the leader still holds its lease under the same epoch.
	Fence *Fence
}

// TransitionNode applies t atomically: it changes the row only while the node's
// status is one of t.From, and returns ErrConflict (or ErrNotFound) otherwise.
// Under t.Fence the change, and the release of the node's runs and claims that
// goes with it, is one fenced transaction (see Fence): ErrLeaseLost when the
// lease is gone.
func TransitionNode(ctx context.Context, db bun.IDB, name string, t Transition) error {
	return fenced(ctx, db, t.Fence, func(ctx context.Context, db bun.IDB) error {
		return transitionNode(ctx, db, name, t)
	})
}

// transitionNode is TransitionNode once its fence holds.
func transitionNode(ctx context.Context, db bun.IDB, name string, t Transition) error {
	now := time.Now().UTC()
	// down_since first: MySQL evaluates the assignments left to right with
	// the values already assigned, SQLite with the old ones.
	q := db.NewUpdate().Model((*Node)(nil))
	if t.To == StatusRunning {
		q = q.Set("down_since = NULL")
	} else {
		q = q.Set("down_since = CASE WHEN status = ? OR down_since IS NULL THEN ? ELSE down_since END", StatusRunning, now)
	}
	q = q.Set("status = ?", t.To).Set("updated_at = ?", now).
		Where("name = ?", name).Where("status IN (?)", bun.In(t.From))
	if t.Secret != nil {
		q = q.Set("secret = ?", *t.Secret)
	}
	if t.BootID != nil {
		q = q.Set("boot_id = ?", *t.BootID)
	}
	if t.DesiredStatus != nil {
		q = q.Set("desired_status = ?", *t.DesiredStatus)
	}
	if t.Reason != nil {
		q = q.Set("reason = ?", *t.Reason)
	}
	if !t.Seen.IsZero() {
		q = q.Set("last_seen = ?", t.Seen.UTC()).Set("failures = 0")
	}
	if t.IfBootID != nil {
		q = q.Where("boot_id = ?", *t.IfBootID)
	}
	res, err := q.Exec(ctx)
	if err := affected(res, err); err != nil {
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: transition node %q: %w", name, err)
		}
		if _, gerr := GetNode(ctx, db, name); gerr != nil {
			return gerr
		}
		return fmt.Errorf("store: transition node %q: %w", name, ErrConflict)
	}
	if t.To == StatusOffline {
		// A worker that stops gracefully has reported its runs first.
		if _, err := LoseRunsOf(ctx, db, name, "the worker went offline during this run"); err != nil {
			return err
		}
	}
	if t.To == StatusOffline || t.To == StatusIdle {
		return ReleaseClaims(ctx, db, name)
	}
	return nil
}

// UpsertRegisteredNode records a self-registration: it creates the node or
// overwrites its configuration, secret and boot id, and sets it running.
// A name that belongs to a node of another type gives ErrConflict.
func UpsertRegisteredNode(ctx context.Context, db bun.IDB, n *Node) error {
	now := time.Now().UTC()
	n.Status, n.DesiredStatus, n.Mode, n.Failures, n.Reason, n.LastSeen = StatusRunning, StatusRunning, ModeAuto, 0, "", now
	n.Labels = cmp.Or(n.Labels, "{}")
	for attempt := 0; ; attempt++ {
		old, err := GetNode(ctx, db, n.Name)
		switch {
		case errors.Is(err, ErrNotFound):
			err = CreateNode(ctx, db, n)
			if errors.Is(err, ErrDuplicate) && attempt == 0 {
				continue // lost a race with a concurrent registration: update instead
			}
			return err
		case err != nil:
			return err
		}
		if old.Type != n.Type {
			return fmt.Errorf("store: node %q is a %s, not a %s: %w", n.Name, old.Type, n.Type, ErrConflict)
		}
		n.ID, n.CreatedAt, n.UpdatedAt = old.ID, old.CreatedAt, now
		_, err = db.NewUpdate().Model(n).
			Column("machine_name", "protocol", "host", "secret", "status", "desired_status", "priority",
				"max_concurrency", "last_seen", "failures", "boot_id", "mode", "reason", "labels", "down_since", "updated_at").
			WherePK().Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: register node %q: %w", n.Name, err)
		}
		return nil
	}
}

// UpdateRegisteredNode records a re-registration of an auto worker: its
// configuration, secret, boot id and node key, status running. It changes the
// row only while it is an auto worker whose stored key is still prevKey, so a
// concurrent registration or Reset identity gives ErrConflict.
func UpdateRegisteredNode(ctx context.Context, db bun.IDB, n *Node, prevKey string) error {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*Node)(nil)).
		Set("machine_name = ?", n.MachineName).Set("protocol = ?", n.Protocol).Set("host = ?", n.Host).
		Set("secret = ?", n.Secret).Set("boot_id = ?", n.BootID).Set("node_key = ?", n.NodeKey).
		Set("priority = ?", n.Priority).Set("max_concurrency = ?", n.MaxConcurrency).
		Set("labels = ?", cmp.Or(n.Labels, "{}")).Set("approved_labels = ?", nullIfEmpty(n.ApprovedLabels)).Set("down_since = NULL").
		Set("clock_skew_ms = ?", n.ClockSkewMS).
		Set("status = ?", StatusRunning).Set("desired_status = ?", StatusRunning).
		Set("failures = 0").Set("reason = ?", "").Set("last_seen = ?", now).Set("updated_at = ?", now).
		Where("name = ?", n.Name).Where("type = ?", TypeWorker).Where("mode = ?", ModeAuto).
		Where("node_key = ?", prevKey).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: register node %q: %w", n.Name, ErrConflict)
		}
		return fmt.Errorf("store: register node %q: %w", n.Name, err)
	}
	n.UpdatedAt = now
	return nil
}

// ResetNodeKey clears a worker node's key so the next registration of its
// name binds a new one. A master node or an unknown name gives ErrNotFound.
func ResetNodeKey(ctx context.Context, db bun.IDB, name string) error {
	res, err := db.NewUpdate().Model((*Node)(nil)).Set("node_key = ?", "").Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Where("type = ?", TypeWorker).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: reset node key of %q: %w", name, ErrNotFound)
		}
		return fmt.Errorf("store: reset node key of %q: %w", name, err)
	}
	return nil
}

// MarkSeen records successful probes of the named nodes in one statement per
// chunk, under fence (nil: unconditionally), all in one transaction when
// fenced, and clears their reason. A lost lease marks nothing and is no error.
func MarkSeen(ctx context.Context, db bun.IDB, names []string, at time.Time, fence *Fence) error {
	return MarkSeenWithReason(ctx, db, names, at, "", fence)
}

// SetClockSkews records the measured clock skews of nodes, in milliseconds
// by name. Under fence (nil: unconditionally) they are one fenced
// transaction, so a leader that lost its lease records nothing (and gets no
// error).
func SetClockSkews(ctx context.Context, db bun.IDB, skews map[string]int64, fence *Fence) error {
	if len(skews) == 0 {
		return nil
	}
	write := func(ctx context.Context, db bun.IDB) error {
		for name, ms := range skews {
			if _, err := db.NewUpdate().Model((*Node)(nil)).Set("clock_skew_ms = ?", ms).Where("name = ?", name).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	if err := fenced(ctx, db, fence, write); err != nil && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("store: set clock skews: %w", err)
	}
	return nil
}

// ClockSkews returns the measured clock skew in milliseconds of every
// worker that is not offline and has one, by name.
func ClockSkews(ctx context.Context, db bun.IDB) (map[string]int64, error) {
	var rows []struct {
		Name        string `bun:"name"`
		ClockSkewMS int64  `bun:"clock_skew_ms"`
	}
	err := db.NewSelect().Model((*Node)(nil)).Column("name", "clock_skew_ms").
		Where("type = ?", TypeWorker).Where("status <> ?", StatusOffline).Where("clock_skew_ms IS NOT NULL").
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: list clock skews: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Name] = r.ClockSkewMS
	}
	return out, nil
}

// MarkSeenWithReason is MarkSeen for nodes that answer but say something is
// wrong (a degraded worker): reason replaces the node's reason.
func MarkSeenWithReason(ctx context.Context, db bun.IDB, names []string, at time.Time, reason string, fence *Fence) error {
	if len(names) == 0 {
		return nil
	}
	err := fenced(ctx, db, fence, func(ctx context.Context, db bun.IDB) error {
		const chunk = 500
		for rest := names; len(rest) > 0; {
			part := rest[:min(chunk, len(rest))]
			rest = rest[len(part):]
			_, err := db.NewUpdate().Model((*Node)(nil)).
				Set("last_seen = ?", at.UTC()).Set("failures = 0").Set("reason = ?", reason).
				Where("name IN (?)", bun.In(part)).Where("status <> ?", StatusOffline).Exec(ctx)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("store: mark nodes seen: %w", err)
	}
	return nil
}

// RecordProbeFailure counts one failed probe of a non-offline node. When the
// count reaches maxFailures the node goes offline with reason, its counter is
// reset and its runs in progress and fire claims are released; wentOffline
// reports that. Under fence (nil: unconditionally) it is one fenced
// transaction, so a leader that lost its lease counts nothing (and gets no
// error).
func RecordProbeFailure(ctx context.Context, db bun.IDB, name string, maxFailures int, reason string, fence *Fence) (wentOffline bool, err error) {
	err = fenced(ctx, db, fence, func(ctx context.Context, db bun.IDB) error {
		var ferr error
		wentOffline, ferr = recordProbeFailure(ctx, db, name, maxFailures, reason)
		return ferr
	})
	switch {
	case errors.Is(err, ErrLeaseLost):
		return false, nil
	case err != nil && fence != nil && !isTx(db):
		return false, err // its own transaction, rolled back: the node is as it was
	}
	return wentOffline, err
}

// recordProbeFailure is RecordProbeFailure once its fence holds.
func recordProbeFailure(ctx context.Context, db bun.IDB, name string, maxFailures int, reason string) (wentOffline bool, err error) {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*Node)(nil)).
		Set("failures = failures + 1").Set("reason = ?", reason).Set("updated_at = ?", now).
		Where("name = ?", name).Where("status <> ?", StatusOffline).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return false, nil // went offline meanwhile: nothing to count
		}
		return false, fmt.Errorf("store: record probe failure: %w", err)
	}
	res, err = db.NewUpdate().Model((*Node)(nil)).
		// Down since its last good probe: it died somewhere after it.
		Set("down_since = CASE WHEN status = ? THEN COALESCE(last_seen, ?) WHEN down_since IS NULL THEN ? ELSE down_since END",
			StatusRunning, now, now).
		Set("status = ?", StatusOffline).Set("failures = 0").
		Set("reason = ?", fmt.Sprintf("offline after %d failed health checks: %s", maxFailures, reason)).
		Set("updated_at = ?", now).
		Where("name = ?", name).Where("status <> ?", StatusOffline).Where("failures >= ?", maxFailures).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("store: take node offline: %w", err)
	}
	if _, err := LoseRunsOf(ctx, db, name, "the worker went offline (failed health checks) during this run"); err != nil {
		return true, err
	}
	return true, ReleaseClaims(ctx, db, name)
}

// ReleaseClaims deletes every fire claim held by the node.
func ReleaseClaims(ctx context.Context, db bun.IDB, node string) error {
	if _, err := db.NewDelete().Model((*Claim)(nil)).Where("node = ?", node).Exec(ctx); err != nil {
		return fmt.Errorf("store: release fire claims of %q: %w", node, err)
	}
	return nil
}

// RunningNodesNamed returns the running nodes among names, by name.
func RunningNodesNamed(ctx context.Context, db bun.IDB, names []string) ([]Node, error) {
	var nodes []Node
	if len(names) == 0 {
		return nodes, nil
	}
	err := db.NewSelect().Model(&nodes).Where("name IN (?)", bun.In(names)).Where("status = ?", StatusRunning).
		OrderExpr("name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: running nodes: %w", err)
	}
	return nodes, nil
}

// CountPendingNodes counts the nodes waiting for an admin's approval.
func CountPendingNodes(ctx context.Context, db bun.IDB) (int, error) {
	n, err := db.NewSelect().Model((*Node)(nil)).Where("mode = ?", ModePending).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count pending nodes: %w", err)
	}
	return int(n), nil
}

// ApproveNode makes a pending node an auto worker (still offline: it gets its
// secret when it next registers). A node that is not pending gives
// ErrConflict, an unknown one ErrNotFound.
func ApproveNode(ctx context.Context, db bun.IDB, name string) error {
	res, err := db.NewUpdate().Model((*Node)(nil)).Set("mode = ?", ModeAuto).Set("approved_labels = labels").
		Set("reason = ?", "approved; waiting for it to register again").Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Where("mode = ?", ModePending).Exec(ctx)
	if err := affected(res, err); err != nil {
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: approve node: %w", err)
		}
		if _, gerr := GetNode(ctx, db, name); gerr != nil {
			return gerr
		}
		return fmt.Errorf("store: approve node %q: %w", name, ErrConflict)
	}
	return nil
}

// PrunePendingNodes deletes the nodes that have waited for approval since
// before cutoff and returns their names.
func PrunePendingNodes(ctx context.Context, db bun.IDB, cutoff time.Time) ([]string, error) {
	var names []string
	if err := db.NewSelect().Model((*Node)(nil)).Column("name").Where("mode = ?", ModePending).
		Where("created_at < ?", cutoff.UTC()).Limit(1000).Scan(ctx, &names); err != nil {
		return nil, fmt.Errorf("store: pending nodes: %w", err)
	}
	var out []string
	for _, name := range names {
		res, err := db.NewDelete().Model((*Node)(nil)).Where("name = ?", name).Where("mode = ?", ModePending).Exec(ctx)
		if err != nil {
			return out, fmt.Errorf("store: prune pending node: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			out = append(out, name)
		}
	}
	return out, nil
}

// nullIfEmpty is s, or NULL when it is empty.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// SetNodeApprovedLabels replaces the declared labels approved for a worker
// (a JSON object; "" is NULL: all it declares).
func SetNodeApprovedLabels(ctx context.Context, db bun.IDB, name, labels string) error {
	_, err := db.NewUpdate().Model((*Node)(nil)).Set("approved_labels = ?", nullIfEmpty(labels)).
		Where("name = ?", name).Where("type = ?", TypeWorker).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: set approved labels of node %q: %w", name, err)
	}
	return nil
}
