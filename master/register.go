package master

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// RegisterHeaders are the authentication headers of a registration.
type RegisterHeaders struct {
	Node, Timestamp, Nonce, Signature string
}

// Register handles a worker's auto-registration: it checks the cluster-key MAC
// over the raw body, upserts the node as running and returns its running tasks.
func (m *Master) Register(ctx context.Context, h RegisterHeaders, body []byte) (worker.RegisterResponse, error) {
	now := time.Now()
	if h.Node == "" || h.Timestamp == "" || h.Nonce == "" || h.Signature == "" {
		return worker.RegisterResponse{}, fmt.Errorf("%w: missing registration headers", ErrUnauthorized)
	}
	if err := worker.CheckTimestamp(h.Timestamp, now); err != nil {
		return worker.RegisterResponse{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if !worker.EqualMAC(h.Signature, worker.RegisterMAC(m.cfg.ClusterKey, h.Node, h.Timestamp, h.Nonce, body)) {
		return worker.RegisterResponse{}, fmt.Errorf("%w: bad registration signature (wrong cluster key?)", ErrUnauthorized)
	}
	if !m.nonces.Use(h.Nonce, now) {
		return worker.RegisterResponse{}, fmt.Errorf("%w: registration nonce already used", ErrUnauthorized)
	}
	var req worker.RegisterRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return worker.RegisterResponse{}, fmt.Errorf("%w: registration body: %v", ErrInvalid, err)
	}
	if err := req.Node.Validate(); err != nil {
		return worker.RegisterResponse{}, err
	}
	if req.Node.Name != h.Node {
		return worker.RegisterResponse{}, fmt.Errorf("%w: body names node %q, header %q", ErrInvalid, req.Node.Name, h.Node)
	}
	if req.Node.Name == m.cfg.Identity {
		return worker.RegisterResponse{}, worker.FieldErrors{"name": "is the master's own name"}
	}
	if b, err := hex.DecodeString(req.Secret); err != nil || len(b) != 32 {
		return worker.RegisterResponse{}, fmt.Errorf("%w: secret must be 32 bytes, hex", ErrInvalid)
	}
	if req.BootID == "" || len(req.BootID) > 64 || len(req.MachineName) > 255 {
		return worker.RegisterResponse{}, fmt.Errorf("%w: boot_id is required (at most 64 chars) and machine_name at most 255", ErrInvalid)
	}
	defer m.locks.lock(req.Node.Name)()
	n := &store.Node{
		Name: req.Node.Name, Type: store.TypeWorker, MachineName: req.MachineName, Protocol: req.Node.Protocol,
		Host: req.Node.Host, Secret: req.Secret, BootID: req.BootID, Priority: req.Node.Priority, MaxConcurrency: req.Node.MaxConcurrency,
	}
	if err := store.UpsertRegisteredNode(ctx, m.st.DB, n); err != nil {
		if errors.Is(err, store.ErrConflict) {
			m.event(workerActor(ctx, n.Name), "node.register", store.TargetNode, n.Name, fmt.Errorf("%w: %v", ErrState, err), "")
			return worker.RegisterResponse{}, fmt.Errorf("%w: %v", ErrState, err)
		}
		m.event(workerActor(ctx, n.Name), "node.register", store.TargetNode, n.Name, err, "")
		return worker.RegisterResponse{}, mapStoreErr(err, req.Node.Name)
	}
	m.log.Info("worker registered", "node", n.Name, "host", n.Host, "boot_id", n.BootID)
	m.event(workerActor(ctx, n.Name), "node.register", store.TargetNode, n.Name, nil, "running on "+n.Protocol+"://"+n.Host)
	return worker.RegisterResponse{Master: m.cfg.Identity, Tasks: m.tasksFor(ctx, n.Name)}, nil
}

// Authenticate checks a worker-to-master call's sm_node and sm_secret against the stored secret.
func (m *Master) Authenticate(ctx context.Context, name, secret string) (*store.Node, error) {
	if name == "" || secret == "" {
		return nil, fmt.Errorf("%w: missing sm_node or sm_secret", ErrUnauthorized)
	}
	n, err := store.GetNode(ctx, m.st.DB, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown node or wrong secret", ErrUnauthorized)
		}
		return nil, mapStoreErr(err, name)
	}
	if n.Type != store.TypeWorker || !worker.EqualSecret(secret, n.Secret) {
		return nil, fmt.Errorf("%w: unknown node or wrong secret", ErrUnauthorized)
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
		From: []int{store.StatusIdle, store.StatusRunning}, To: store.StatusOffline,
		DesiredStatus: ptr(store.StatusOffline), Reason: ptr("worker stopped (graceful shutdown)"),
	})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		m.event(workerActor(ctx, name), "node.offline", store.TargetNode, name, err, "worker stopped (graceful shutdown)")
		return mapStoreErr(err, name)
	}
	m.log.Info("worker went offline", "node", name)
	if err == nil {
		m.event(workerActor(ctx, name), "node.offline", store.TargetNode, name, nil, "worker stopped (graceful shutdown)")
	}
	return nil
}
