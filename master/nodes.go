package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// mapStoreErr turns store sentinels into master ones, keeping the message.
func mapStoreErr(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return Errorf(KindNotFound, "node %q does not exist", name)
	case errors.Is(err, store.ErrDuplicate):
		return Errorf(KindDuplicate, "a node named %q already exists", name)
	case errors.Is(err, store.ErrConflict):
		return Errorf(KindState, "node %q changed state meanwhile; reload and retry", name)
	}
	return fmt.Errorf("master: node %q: %w", name, err)
}

// List returns every node.
func (nd *Nodes) List(ctx context.Context) ([]store.Node, error) {
	return store.ListNodes(ctx, nd.m.st.DB)
}

// Get returns one node.
func (nd *Nodes) Get(ctx context.Context, name string) (*store.Node, error) {
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	return n, mapStoreErr(err, name)
}

// Create adds a manual worker node in status offline.
func (nd *Nodes) Create(ctx context.Context, c protocol.NodeConfig) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() { nd.m.events.record(ctx, "node.create", store.TargetNode, c.Name, err, c.Protocol+"://"+c.Host) }()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if strings.EqualFold(c.Name, nd.m.cfg.Identity) {
		return nil, protocol.FieldErrors{"name": "is the master's own name"}
	}
	n := &store.Node{
		Name: c.Name, Type: store.TypeWorker, Protocol: c.Protocol, Host: c.Host,
		Priority: c.Priority, MaxConcurrency: c.MaxConcurrency, Status: store.StatusOffline, Mode: store.ModeManual,
	}
	if err := store.CreateNode(ctx, nd.m.st.DB, n); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			return nil, protocol.FieldErrors{"name": "is already taken by another node"}
		}
		return nil, mapStoreErr(err, c.Name)
	}
	nd.m.log.Info("node created", "node", n.Name, "host", n.Host)
	return n, nil
}

// Update edits a worker's protocol, host, priority and max concurrency.
func (nd *Nodes) Update(ctx context.Context, name string, c protocol.NodeConfig) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() {
		nd.m.events.record(ctx, "node.edit", store.TargetNode, name, err,
			fmt.Sprintf("%s://%s, priority %d, max concurrency %d", c.Protocol, c.Host, c.Priority, c.MaxConcurrency))
	}()
	c.Name = name
	if err := c.Validate(); err != nil {
		return nil, err
	}
	defer nd.m.locks.lock(name)()
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	if n.Type == store.TypeMaster {
		return nil, Errorf(KindState, "the master's own node cannot be edited")
	}
	err = store.UpdateNodeConfig(ctx, nd.m.st.DB, name, store.NodeConfig{
		Protocol: c.Protocol, Host: c.Host, Priority: c.Priority, MaxConcurrency: c.MaxConcurrency,
	})
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	nd.m.log.Info("node edited", "node", name)
	return nd.Get(ctx, name)
}

// requireState loads a worker node and checks that its status allows a.
func (nd *Nodes) requireState(ctx context.Context, name, action string, a NodeAction) (*store.Node, error) {
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	if n.Type == store.TypeMaster {
		return nil, Errorf(KindState, "%s is the master; it cannot be %s", name, action)
	}
	if n.Mode == store.ModePending {
		return nil, Errorf(KindState, "node %s waits for an admin's approval; approve it first", name)
	}
	if !NodeAllows(n.Status, a) {
		return nil, Errorf(KindState, "node %s is %s; %s needs it %s", name, n.Status, action, statusList(nodeFrom(a)))
	}
	return n, nil
}

func ptr[T any](v T) *T { return &v }

// Connect performs the handshake with an offline node and makes it idle.
func (nd *Nodes) Connect(ctx context.Context, name string) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() { nd.m.events.record(ctx, "node.connect", store.TargetNode, name, err, "") }()
	defer nd.m.locks.lock(name)()
	n, err := nd.requireState(ctx, name, "connected", NodeConnect)
	if err != nil {
		return nil, err
	}
	resp, err := nd.m.client.Connect(ctx, n, nd.m.cfg.Cluster, nd.m.cfg.ClusterKey)
	if err != nil {
		return nil, err
	}
	err = store.TransitionNode(ctx, nd.m.st.DB, name, store.Transition{
		From: nodeFrom(NodeConnect), To: store.StatusIdle,
		Secret: &resp.Secret, BootID: &resp.BootID, DesiredStatus: ptr(store.StatusIdle), Reason: ptr(""), Seen: time.Now(),
	})
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	nd.m.log.Info("node connected", "node", name)
	return nd.Get(ctx, name)
}

// Enable starts scheduling on an idle node and pushes its running tasks.
func (nd *Nodes) Enable(ctx context.Context, name string) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() { nd.m.events.record(ctx, "node.enable", store.TargetNode, name, err, "") }()
	defer nd.m.locks.lock(name)()
	n, err := nd.requireState(ctx, name, "enabled", NodeEnable)
	if err != nil {
		return nil, err
	}
	if err := nd.m.tasks.pushTasks(ctx, n); err != nil {
		return nil, err
	}
	err = store.TransitionNode(ctx, nd.m.st.DB, name, store.Transition{
		From: nodeFrom(NodeEnable), To: store.StatusRunning, DesiredStatus: ptr(store.StatusRunning), Reason: ptr(""), Seen: time.Now(),
	})
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	nd.m.log.Info("node enabled", "node", name)
	nd.m.tasks.nodeChanged()
	return nd.Get(ctx, name)
}

// Disable stops scheduling on a running node; it becomes idle and its fire claims are released.
func (nd *Nodes) Disable(ctx context.Context, name string) (_ *store.Node, err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, err
	}
	defer func() { nd.m.events.record(ctx, "node.disable", store.TargetNode, name, err, "") }()
	defer nd.m.locks.lock(name)()
	n, err := nd.requireState(ctx, name, "disabled", NodeDisable)
	if err != nil {
		return nil, err
	}
	if err := nd.m.client.Shutdown(ctx, n, nd.m.cfg.ShutdownWait); err != nil {
		return nil, err
	}
	err = store.TransitionNode(ctx, nd.m.st.DB, name, store.Transition{
		From: nodeFrom(NodeDisable), To: store.StatusIdle, DesiredStatus: ptr(store.StatusIdle), Reason: ptr(""), Seen: time.Now(),
	})
	if err != nil {
		return nil, mapStoreErr(err, name)
	}
	nd.m.log.Info("node disabled", "node", name)
	nd.m.tasks.nodeChanged()
	return nd.Get(ctx, name)
}

// Delete removes a worker node that is not running.
func (nd *Nodes) Delete(ctx context.Context, name string) (err error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	defer func() { nd.m.events.record(ctx, "node.delete", store.TargetNode, name, err, "") }()
	defer nd.m.locks.lock(name)()
	n, err := store.GetNode(ctx, nd.m.st.DB, name)
	if err != nil {
		return mapStoreErr(err, name)
	}
	if n.Type == store.TypeMaster {
		return Errorf(KindState, "%s is the master; it cannot be deleted", name)
	}
	err = nd.m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.DeleteNode(ctx, tx, name); err != nil {
			return err
		}
		return store.RemoveNodeFromTasks(ctx, tx, name)
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return Errorf(KindState, "node %s is running; disable it before deleting it", name)
		}
		return mapStoreErr(err, name)
	}
	nd.m.log.Info("node deleted", "node", name)
	nd.m.tasks.nodeChanged()
	return nil
}
