package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// failoverInterval is the masters' health interval here; the lease is three of them.
const failoverInterval = time.Second

// Row names of the failover scenario, per database server.
func failoverRowNames(label string) (failover, claim string) {
	return "leader failover, kill -9 of the leader (1 s interval, lease 3 s), " + label,
		"claim latency, 3 executors on 2 masters, " + label
}

// failoverScenario runs real master processes on one database of each
// server configured, MariaDB, Galera and PostgreSQL (several masters need a
// database server; SQLite is one master), and measures the time from kill -9
// of the leader until another master's /health says it leads, and the
// latency of fire claims when a task's executors talk to different masters.
// On Galera every master uses its own node, in turn: claims of one fire race
// on two nodes and are settled by Galera's certification, and the lease
// passes between nodes.
func (b *bench) failoverScenario(ctx context.Context) []row {
	var rows []row
	for _, srv := range b.servers() {
		label := srv.label
		if srv.key == "galera" {
			label += ", each master on its own node"
		}
		failoverRowName, claimRowName := failoverRowNames(label)
		if srv.dsns == nil {
			rows = append(rows,
				row{claimRowName, srv.missing, "p99 < 20 ms", Skip},
				row{failoverRowName, srv.missing, "≤ lease + interval = 4 s", Skip})
			continue
		}
		rows = append(rows, b.failoverOn(ctx, srv, failoverRowName, claimRowName)...)
	}
	return rows
}

// failoverOn is failoverScenario on one database server.
func (b *bench) failoverOn(ctx context.Context, srv server, failoverRowName, claimRowName string) []row {
	bin, err := b.binaryPath(ctx)
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	dsns, drop, err := srv.create(ctx)
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	defer drop()

	// Three healthy fake workers execute one running task; the masters probe
	// them like real workers, and the bench claims fires in their names.
	log, _ := b.newLogger()
	sdsn, err := store.ParseDSN(dsns[0], "")
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	st, err := store.Open(ctx, sdsn, log)
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	defer st.Close()
	f, err := startFleet(3, 0, "failover-boot", true)
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	defer f.Close()
	if err := insertNodes(ctx, st.DB, f.Nodes); err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	var names []string
	for _, n := range f.Nodes {
		names = append(names, n.Name)
	}
	tk, err := taskRow(httpTask("failover-claims", "* * * * * *", "http://127.0.0.1:1"), store.TaskRunning, names)
	if err != nil {
		return []row{errRow(failoverRowName, err)}
	}
	if err := insertTasks(ctx, st.DB, []*store.Task{tk}); err != nil {
		return []row{errRow(failoverRowName, err)}
	}

	var masters []*proc
	var urls []string
	defer func() {
		for _, p := range masters {
			p.kill()
		}
	}()
	// Master k uses node k mod nodes: on Galera the two masters of the
	// claims are on different nodes, and each new master on the next one.
	startMaster := func(identity string) error {
		dir := filepath.Join(b.tmp, "failover-"+identity)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		dsn := dsns[len(masters)%len(dsns)]
		p, m, err := startProc(ctx, bin, masterServing, "master", "--listen", "127.0.0.1:0", "--db", dsn,
			"--data-dir", dir, "--identity", identity, "--admin-password", benchPassword, "--cluster-key", benchClusterKey,
			"--health-interval", failoverInterval.String(), "--health-timeout", "500ms")
		if err != nil {
			return fmt.Errorf("start master %s: %w", identity, err)
		}
		masters, urls = append(masters, p), append(urls, m[1])
		return nil
	}
	for _, id := range []string{"fm1", "fm2"} {
		if err := startMaster(id); err != nil {
			return []row{errRow(failoverRowName, err)}
		}
	}

	rows := []row{b.claimLatency(ctx, urls, f.Nodes, tk.ID, claimRowName)}

	// Failover: kill the leader, time until another master leads; then start
	// a fresh master (a new identity: the dead one's heartbeat is not stale
	// yet) so the next run has two masters again.
	var took []time.Duration
	for i := 0; i < b.opt.Runs; i++ {
		li, err := waitLeader(ctx, urls, masters, 30*time.Second)
		if err != nil {
			return append(rows, errRow(failoverRowName, err))
		}
		masters[li].kill()
		t0 := time.Now()
		if _, err := waitLeader(ctx, urls, masters, 30*time.Second); err != nil {
			return append(rows, errRow(failoverRowName, err))
		}
		took = append(took, time.Since(t0))
		b.logf("failover %d: %s", i+1, fmtDur(took[len(took)-1]))
		if i+1 < b.opt.Runs {
			if err := startMaster(fmt.Sprintf("fm%d", len(masters)+1)); err != nil {
				return append(rows, errRow(failoverRowName, err))
			}
		}
	}
	bound := 3*failoverInterval + failoverInterval
	med := medianDur(took)
	fig := fmt.Sprintf("%s until another master's /health says leader (max %s of %d)", fmtDur(med), fmtDur(maxDur(took)), len(took))
	return append(rows, row{failoverRowName, fig, "≤ lease + interval = " + fmtDur(bound), verdict(med <= bound)})
}

// claimLatency claims fires of one task whose executors talk to different
// masters (executor i to master i mod 2), all executors of a fire at once as
// their timers would, and reports the latency of single claims. Every fire
// must have exactly one winner that every executor is told.
func (b *bench) claimLatency(ctx context.Context, urls []string, nodes []store.Node, task, claimRowName string) row {
	fires := b.pick(300, 30)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	claim := func(url string, n store.Node, fire time.Time) (protocol.ClaimResponse, time.Duration, error) {
		body, _ := json.Marshal(protocol.ClaimRequest{TaskID: task, FireAt: fire})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+protocol.PathMasterClaim, bytes.NewReader(body))
		if err != nil {
			return protocol.ClaimResponse{}, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(protocol.HeaderNode, n.Name)
		req.Header.Set(protocol.HeaderSecret, n.Secret)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return protocol.ClaimResponse{}, 0, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		took := time.Since(t0)
		var cr protocol.ClaimResponse
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &cr) != nil {
			return cr, took, fmt.Errorf("claim on %s as %s: %d %s", url, n.Name, resp.StatusCode, strings.TrimSpace(string(data)))
		}
		return cr, took, nil
	}
	// The first fire warms up the connections and is not counted.
	// Fires of the last hour: a claim of a fire further ahead than the
	// skew allowance (a few seconds) is refused as too early.
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	var lat []time.Duration
	for i := 0; i < fires+1; i++ {
		fire := base.Add(time.Duration(i) * time.Second)
		var wg sync.WaitGroup
		answers := make([]protocol.ClaimResponse, len(nodes))
		took := make([]time.Duration, len(nodes))
		errs := make([]error, len(nodes))
		for j, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[j], took[j], errs[j] = claim(urls[j%len(urls)], n, fire)
			}()
		}
		wg.Wait()
		won := 0
		for j := range nodes {
			if errs[j] != nil {
				return errRow(claimRowName, errs[j])
			}
			if answers[j].Won {
				won++
			}
			if answers[j].Winner != answers[0].Winner || answers[j].Winner == "" {
				return errRow(claimRowName, fmt.Errorf("fire %s: executors were told different winners: %+v", fire, answers))
			}
		}
		if won != 1 {
			return errRow(claimRowName, fmt.Errorf("fire %s: %d winners", fire, won))
		}
		if i > 0 {
			lat = append(lat, took...)
		}
	}
	s := sortDurations(lat)
	p99 := percentile(s, 0.99)
	fig := fmt.Sprintf("p50 %s, p99 %s, max %s over %s claims (%d fires, one winner each)",
		fmtDur(percentile(s, 0.50)), fmtDur(p99), fmtDur(s[len(s)-1]), fmtInt(len(s)), fires)
	return row{claimRowName, fig, "p99 < 20 ms", verdict(p99 < 20*time.Millisecond)}
}

// waitLeader polls the live masters' /health until one says it leads and
// returns its index.
func waitLeader(ctx context.Context, urls []string, masters []*proc, timeout time.Duration) (int, error) {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		for i, u := range urls {
			select {
			case <-masters[i].done:
				continue // killed
			default:
			}
			resp, err := c.Get(u + protocol.PathHealth)
			if err != nil {
				continue
			}
			var h struct {
				Leader bool `json:"leader"`
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err == nil && h.Leader {
				return i, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no master says it leads after %s (GET /health \"leader\")", timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// createMySQLDatabase creates an empty database smbench_<time>_<random>
// on the server of raw and returns its go-sql-driver DSN and a function that
// drops it. Before, once a run, it drops what earlier runs left behind
// (sweepMySQL); until the drop, the database's lock says it is in use.
func (b *bench) createMySQLDatabase(ctx context.Context, raw string) (string, func(), error) {
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(raw, "mysql://"))
	if err != nil {
		return "", nil, fmt.Errorf("-mysql: %w", err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	b.leftovers.sweepOnce("mysql "+admin.Addr, func() { sweepMySQL(ctx, db, admin.Addr, b.began, b.opt.ScaleMySQL, b.say) })
	name := newDatabaseName(time.Now())
	release := holdMySQLDatabase(ctx, db, name)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		release()
		db.Close()
		return "", nil, fmt.Errorf("create database on %s: %w", admin.Addr, err)
	}
	drop := func() {
		dropDatabase(db, admin.Addr, name, "DROP DATABASE IF EXISTS `"+name+"`", b.say)
		release()
		db.Close()
	}
	cfg.DBName = name
	return cfg.FormatDSN(), drop, nil
}
