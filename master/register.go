package master

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// RegisterHeaders are the authentication headers of a registration.
type RegisterHeaders struct {
	Node, Timestamp, Nonce, Signature string
	// NodeSignature is the Ed25519 signature made with the node's own key
	// (worker.SignRegistration), header sm_node_signature.
	NodeSignature string
	// RemoteAddr is the client address the registration came from, for the
	// event log.
	RemoteAddr string
}

// Bounds of self-registration: new names per minute on one master, and the
// nodes that may wait for approval at once. A pending node that is not
// approved within PendingNodeTTL is deleted.
const (
	MaxNewNamesPerMinute = 30
	MaxPendingNodes      = 100
	PendingNodeTTL       = 24 * time.Hour
)

// selfPriority caps the priority a machine declares for itself: only an
// admin raises a node above the default.
func selfPriority(declared int) int { return min(declared, protocol.DefaultPriority) }

// Register handles a worker's auto-registration. The cluster-key MAC over the
// raw body lets a machine join; the node key binds the name to that machine
// (trust on first use): a new name is created and bound to the key it
// presents; an auto node without a key (legacy, or after Reset identity)
// binds it; an auto node with a key accepts only that key. Registration never
// touches a node an admin created, the master's node, or a name that differs
// only in case from another node. It returns the node's running and paused
// tasks: all of them, or to a worker that takes them in parts
// (RegisterRequest.Parts) the first page, the rest fetched by Tasks.Page.
func (m *Master) Register(ctx context.Context, h RegisterHeaders, body []byte) (protocol.RegisterResponse, error) {
	now := time.Now()
	if h.Node == "" || h.Timestamp == "" || h.Nonce == "" || h.Signature == "" {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "missing registration headers")
	}
	if err := protocol.CheckTimestamp(h.Timestamp, now); err != nil {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "%v", err)
	}
	if !protocol.EqualMAC(h.Signature, protocol.RegisterMAC(m.cfg.ClusterKey, h.Node, h.Timestamp, h.Nonce, body)) {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "bad registration signature (wrong cluster key?)")
	}
	if len(h.Nonce) > 128 || !m.nonces.Use(h.Nonce, now) {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "registration nonce already used")
	}
	var req protocol.RegisterRequest
	if err := protocol.DecodeStrict(body, &req); err != nil {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "registration body: %v", err)
	}
	if err := req.Node.Validate(); err != nil {
		return protocol.RegisterResponse{}, err
	}
	if req.Node.Name != h.Node {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "body names node %q, header %q", req.Node.Name, printable(h.Node))
	}
	if strings.EqualFold(req.Node.Name, m.cfg.Identity) {
		return protocol.RegisterResponse{}, protocol.FieldErrors{"name": "is the master's own name"}
	}
	if b, err := hex.DecodeString(req.Secret); err != nil || len(b) != 32 {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "secret must be 32 bytes, hex")
	}
	if req.BootID == "" || len(req.BootID) > 64 || len(req.MachineName) > 255 {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "boot_id is required (at most 64 chars) and machine_name at most 255")
	}
	if !utf8.ValidString(req.MachineName) || strings.ContainsRune(req.MachineName, 0) ||
		!utf8.ValidString(req.BootID) || strings.ContainsRune(req.BootID, 0) {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "boot_id and machine_name must be valid UTF-8 without NUL")
	}
	key, err := hex.DecodeString(req.NodeKey)
	if err != nil || len(key) != ed25519.PublicKeySize {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "node_key must be a %d-byte Ed25519 public key, hex (upgrade the worker)", ed25519.PublicKeySize)
	}
	nodeKey := hex.EncodeToString(key) // one spelling, so keys compare as strings
	if h.NodeSignature == "" {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "missing %s", protocol.HeaderNodeSignature)
	}
	if !protocol.VerifyRegistration(nodeKey, h.NodeSignature, h.Node, h.Timestamp, h.Nonce, body) {
		return protocol.RegisterResponse{}, Errorf(KindUnauthorized, "bad node key signature")
	}

	if err := req.Labels.Validate(); err != nil {
		return protocol.RegisterResponse{}, Errorf(KindInvalid, "labels: %v", err)
	}
	name := req.Node.Name
	defer m.locks.lock(name)()
	n := &store.Node{
		Name: name, Type: store.TypeWorker, MachineName: req.MachineName, Protocol: req.Node.Protocol,
		Host: req.Node.Host, Secret: req.Secret, BootID: req.BootID, Priority: selfPriority(req.Node.Priority),
		MaxConcurrency: req.Node.MaxConcurrency, NodeKey: nodeKey, Labels: encodeLabels(req.Labels),
	}
	// The worker's clock when it sent this, against the master's when it
	// came (a registration has no round trip to halve).
	var skew time.Duration
	if req.WorkerTimeMS != 0 {
		skew = protocol.ClockSkew(time.UnixMilli(req.WorkerTimeMS), now, now)
		n.ClockSkewMS = sql.NullInt64{Int64: skew.Milliseconds(), Valid: true}
	}
	noteSkew := func(before sql.NullInt64) {
		if n.ClockSkewMS.Valid {
			m.nodes.clockSkewChanged(workerActor(ctx, name), name, before, skew)
		}
	}
	from := "from " + printable(h.RemoteAddr)
	refuse := func(err error) (protocol.RegisterResponse, error) {
		m.events.record(workerActor(ctx, name), "node.register", store.TargetNode, name, err, from)
		return protocol.RegisterResponse{}, err
	}
	old, err := store.GetNodeFold(ctx, m.st.DB, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if err := m.nodes.admitNewName(ctx, now); err != nil {
			return refuse(err)
		}
		n.Status, n.DesiredStatus, n.Mode, n.LastSeen = store.StatusRunning, store.StatusRunning, store.ModeAuto, time.Now().UTC()
		pool, err := m.pools.approvedPool(ctx, req.Labels)
		if err != nil {
			return protocol.RegisterResponse{}, mapStoreErr(err, name)
		}
		if pool != "" {
			from += "; member of approved pool " + pool
		}
		if n.ApprovedLabels, err = m.pools.approvedLabelsFor(ctx, nil, req.Labels); err != nil {
			return protocol.RegisterResponse{}, mapStoreErr(err, name)
		}
		if m.settings.inForce().ApproveNewNodes && pool == "" {
			// Kept with its key (trust on first use) but no secret: it is
			// offline, never probed or picked, until an admin approves it.
			n.Status, n.DesiredStatus, n.Mode, n.Secret = store.StatusOffline, store.StatusOffline, store.ModePending, ""
			n.Reason = "waits for an admin's approval"
		}
		if err := store.CreateNode(ctx, m.st.DB, n); err != nil {
			if errors.Is(err, store.ErrDuplicate) {
				return refuse(Errorf(KindDuplicate, "a node named %q (or differing only in case) was created meanwhile", name))
			}
			return refuse(mapStoreErr(err, name))
		}
		noteSkew(sql.NullInt64{})
		if n.Mode == store.ModePending {
			m.log.Warn("new node waits for approval", "node", name, "host", n.Host, "from", h.RemoteAddr)
			m.events.record(workerActor(ctx, name), "node.register", store.TargetNode, name, nil,
				"new name "+from+", at "+n.Protocol+"://"+n.Host+"; waits for an admin's approval")
			m.tasks.nodeChanged()
			return protocol.RegisterResponse{}, pendingRefusal(name)
		}
	case err != nil:
		return protocol.RegisterResponse{}, mapStoreErr(err, name)
	case old.Name != name:
		return refuse(Errorf(KindDuplicate, "node %q already exists; names are case-insensitive", old.Name))
	case old.Type != store.TypeWorker:
		return refuse(Errorf(KindState, "%q is the name of a master; workers and masters never share a name", name))
	case old.Mode == store.ModePending:
		if old.NodeKey != "" && subtle.ConstantTimeCompare([]byte(old.NodeKey), []byte(nodeKey)) != 1 {
			return refuse(Errorf(KindState, "node %s is bound to another machine's key; an admin can reset its identity", name))
		}
		return protocol.RegisterResponse{}, pendingRefusal(name)
	case old.Mode != store.ModeAuto:
		return refuse(Errorf(KindState, "node %s was added by an admin (manual registration); it is connected from the console and cannot register itself", name))
	case old.NodeKey != "" && subtle.ConstantTimeCompare([]byte(old.NodeKey), []byte(nodeKey)) != 1:
		return refuse(Errorf(KindState, "node %s is bound to another machine's key; an admin can reset its identity", name))
	default:
		// The priority is the admin's once the node exists; its declared
		// labels select it only as far as they are approved.
		n.Priority = old.Priority
		if n.ApprovedLabels, err = m.pools.approvedLabelsFor(ctx, old, req.Labels); err != nil {
			return refuse(mapStoreErr(err, name))
		}
		if err := store.UpdateRegisteredNode(ctx, m.st.DB, n, old.NodeKey); err != nil {
			return refuse(mapStoreErr(err, name))
		}
		noteSkew(old.ClockSkewMS)
		if old.BootID != n.BootID {
			// A new process: the old one's runs in progress died with it.
			if _, err := store.LoseRunsOf(ctx, m.st.DB, name, "the worker restarted during this run"); err != nil {
				m.log.Error("mark the runs of a restarted worker lost", "node", name, "err", err)
			}
		}
	}
	detail := "running on " + n.Protocol + "://" + n.Host + ", " + from
	if old == nil {
		detail = "new name " + from + ", running on " + n.Protocol + "://" + n.Host + ", priority " + strconv.Itoa(n.Priority)
	}
	if old == nil || old.NodeKey == "" {
		detail += "; node key bound"
	}
	m.log.Info("worker registered", "node", n.Name, "host", n.Host, "boot_id", n.BootID)
	m.events.record(workerActor(ctx, n.Name), "node.register", store.TargetNode, n.Name, nil, detail)
	m.tasks.nodeChanged()
	// A node the master had seen down (offline or idle) has its tasks' missed
	// fires in the master's misfire windows from when it saw it stop; the
	// worker counts those before (its previous process may have stopped long
	// before, while no master ran), and all of them when the master had not
	// seen it down (a restart faster than the health checks).
	resp := protocol.RegisterResponse{Master: m.cfg.Cluster}
	if req.Parts {
		// The first page only; the worker fetches the rest (Tasks.Page).
		m.pools.refreshMembers(ctx, n.Name)
		var err error
		if resp.Tasks, resp.After, resp.More, err = m.tasks.taskPage(ctx, n.Name, "", pushPart); err != nil {
			m.log.Error("load tasks of node", "node", n.Name, "err", err)
			return protocol.RegisterResponse{}, mapStoreErr(err, n.Name)
		}
	} else {
		// A worker of an earlier version reads every task from the answer.
		resp.Tasks = m.tasks.tasksFor(ctx, n.Name)
	}
	if old != nil && old.Status != store.StatusRunning {
		// Where the master's misfire windows for its tasks begin.
		since, up := cmp.Or(old.DownSince, old.UpdatedAt).UTC(), n.UpdatedAt.UTC()
		resp.DownNoticed, resp.DownSince = true, &since
		if !up.IsZero() {
			resp.RunningSince = &up
		}
	}
	return resp, nil
}

// ResetIdentity clears a worker node's key, so that the next registration of
// its name (a replaced machine) binds a new one. It is an admin action,
// recorded as event node.reset_identity.
func (nd *Nodes) ResetIdentity(ctx context.Context, name string) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() { nd.m.events.record(ctx, "node.reset_identity", store.TargetNode, name, err, "") }()
	defer nd.m.locks.lock(name)()
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	if n.Type != store.TypeWorker {
		return nil, Errorf(KindState, "%s is the master; it has no node key", name)
	}
	if err := store.ResetNodeKey(ctx, nd.m.st.DB, name); err != nil {
		return nil, mapStoreErr(err, name)
	}
	nd.m.log.Info("node identity reset", "node", name, "by", ActorFrom(ctx))
	return nd.Get(ctx, name)
}

// Authenticate checks a worker-to-master call's sm_node and sm_secret against the stored secret.
func (m *Master) Authenticate(ctx context.Context, name, secret string) (*store.Node, error) {
	if name == "" || secret == "" {
		return nil, Errorf(KindUnauthorized, "missing sm_node or sm_secret")
	}
	n, err := store.GetNode(ctx, m.st.DB, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, Errorf(KindUnauthorized, "unknown node or wrong secret")
		}
		return nil, mapStoreErr(err, name)
	}
	if n.Type != store.TypeWorker || n.Mode == store.ModePending || !protocol.EqualSecret(secret, n.Secret) {
		return nil, Errorf(KindUnauthorized, "unknown node or wrong secret")
	}
	return n, nil
}

// Offline handles a worker's graceful stop: the node goes offline and stays so
// until it registers or is connected again.
func (m *Master) Offline(ctx context.Context, name, secret string) error {
	defer m.locks.lock(name)()
	n, err := m.Authenticate(ctx, name, secret)
	if err != nil {
		return err
	}
	if n.Status == store.StatusOffline {
		return nil
	}
	err = store.TransitionNode(ctx, m.st.DB, name, store.Transition{
		From: []store.NodeStatus{store.StatusIdle, store.StatusRunning}, To: store.StatusOffline,
		DesiredStatus: ptr(store.StatusOffline), Reason: ptr("worker stopped (graceful shutdown)"),
	})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		m.events.record(workerActor(ctx, name), "node.offline", store.TargetNode, name, err, "worker stopped (graceful shutdown)")
		return mapStoreErr(err, name)
	}
	m.log.Info("worker went offline", "node", name)
	if err == nil {
		m.events.record(workerActor(ctx, name), "node.offline", store.TargetNode, name, nil, "worker stopped (graceful shutdown)")
		m.tasks.nodeChanged()
	}
	return nil
}
