package master_test

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

func identity(name string) func(*master.Config) {
	return func(c *master.Config) { c.Identity = name }
}

// The handshake names the cluster, not the master: masters whose identities
// differ from the cluster's name connect a worker whose --workerof names the
// cluster (by default "master", as today's commands say), and a master of
// another cluster is refused.
func TestConnectNamesTheCluster(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		m1 := newEnv(t, s, identity("m1"))
		m2 := &env{t: t, ctx: m1.ctx, s: s, m: newMaster(t, s, identity("m2"))}
		if m1.m.Cluster() != master.DefaultCluster || m2.m.Cluster() != master.DefaultCluster {
			t.Fatalf("default clusters %q %q", m1.m.Cluster(), m2.m.Cluster())
		}
		// Each master of the default cluster connects a worker of "master".
		for _, c := range []struct {
			e    *env
			name string
		}{{m1, "wa"}, {m2, "wb"}} {
			tw := startWorker(t, c.name) // WorkerOf "master"
			c.e.create(tw)
			if n := c.e.connect(c.name); n.Status != store.StatusIdle || !tw.W.CheckSecret(n.Secret) {
				t.Fatalf("%s connected by %s: %+v", c.name, c.e.m.Identity(), n)
			}
		}

		// A master of another cluster, on the same database, is refused.
		prod := &env{t: t, ctx: m1.ctx, s: s, m: newMaster(t, s, identity("p1"), func(c *master.Config) { c.Cluster = "prod" })}
		wc := startWorker(t, "wc")
		prod.create(wc)
		_, err := prod.m.Nodes().Connect(prod.ctx, "wc")
		if err == nil || !strings.Contains(err.Error(), "another cluster") {
			t.Fatalf("a master of cluster prod connected a worker of master: %v", err)
		}
		if wc.W.Health().Status != protocol.StateWaiting {
			t.Error("the refused worker left waiting")
		}
		// ...and accepted by a worker of its own cluster.
		wd := startWorker(t, "wd", func(c *worker.Config) { c.WorkerOf = "prod" })
		prod.create(wd)
		if n := prod.connect("wd"); n.Status != store.StatusIdle {
			t.Fatalf("wd: %+v", n)
		}
	})
}

// A worker registered through one master answers the cluster's name, so any
// other master of the cluster may connect it later (recovery, Connect).
func TestRegisteredWorkerAcceptsAnyMasterOfItsCluster(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		m2 := newEnv(t, s, identity("m2"))
		tw := startWorker(t, "auto1", autoCfg(m2.serveMaster()))
		runWorker(t, tw.W)
		n := m2.node("auto1")

		// Master m1 signs for the cluster, as ConnectNode and recovery do.
		m1 := newMaster(t, s, identity("m1"))
		resp, err := master.NewClient(5*time.Second).Connect(m2.ctx, n, m1.Cluster(), clusterKey)
		if err != nil {
			t.Fatalf("master m1 could not connect a worker registered through m2: %v", err)
		}
		if !tw.W.CheckSecret(resp.Secret) || resp.BootID != tw.W.BootID() {
			t.Errorf("connect answer %+v", resp)
		}
		// Signing with a master's own name is no longer the handshake.
		if _, err := master.NewClient(5*time.Second).Connect(m2.ctx, n, m1.Identity(), clusterKey); err == nil {
			t.Error("a handshake signed for master m1 rather than the cluster was accepted")
		}
	})
}
