package storetest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// GaleraEviction is the group-communication part of the test cluster's
// wsrep_provider_options, and the README's advice for a short health
// interval: a node that stops answering (killed, frozen, cut off) is suspected
// after 2 s of silence (evs.suspect_timeout, default 5 s), checked every
// 0.25 s (evs.inactive_check_period, default 0.5 s; at most half the suspect
// timeout), with keepalives every 0.5 s (evs.keepalive_period, default 1 s;
// under a third of it) and join messages resent every 0.25 s while the new
// view forms (evs.join_retrans_period, default 1 s). Until the view without
// that node is installed, Galera commits nothing anywhere; measured here, the
// stall is 2.3-2.5 s instead of 6.1-6.7 s with the defaults.
// evs.inactive_timeout (the limit without consensus) keeps its 15 s.
const GaleraEviction = "evs.suspect_timeout=PT2S;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.25S;evs.join_retrans_period=PT0.25S"

// EnvGaleraOptions, when set, replaces GaleraEviction (e.g. to measure
// Galera's defaults with SM_TEST_GALERA_OPTIONS=none).
const EnvGaleraOptions = "SM_TEST_GALERA_OPTIONS"

// galeraProvider is where Debian's galera-4 package puts the provider.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// Galera is a three-node MariaDB Galera cluster on loopback, started by
// StartGalera and stopped (every process killed, its files removed) when the
// test ends.
type Galera struct {
	Nodes []*GaleraNode
	// Eviction is the evs options in force (GaleraEviction or the override).
	Eviction string
	// StartedIn is how long StartGalera took.
	StartedIn time.Duration

	t    testing.TB
	base string
	// tmpdir is the cluster's own temporary directory (see StartGalera).
	tmpdir string
	name   string
	mu     sync.Mutex
}

// GaleraNode is one mariadbd of a Galera cluster.
type GaleraNode struct {
	// Index is the node's place in Galera.Nodes.
	Index int
	// Addr is the node's SQL address, 127.0.0.1:port.
	Addr string

	g       *Galera
	datadir string
	sock    string
	gcomm   int // group communication port
	ist     int // incremental state transfer port
	sst     int // state snapshot transfer (rsync daemon) port

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	frozen bool
}

// StartGalera starts a three-node MariaDB Galera cluster on loopback and
// returns it once every node is synced. Without mariadbd,
// mariadb-install-db, rsync or the galera-4 provider it skips (or fails, see
// RequireAll). Start-up takes 6-10 s here (30 s on a machine busy with
// other tests): one data directory is made and bootstrapped once, then
// copied to the other two, which join by IST of a few configuration changes
// rather than a full copy; most of a join is the rsync SST script, which
// runs even for an IST.
func StartGalera(t testing.TB) *Galera {
	t.Helper()
	if why := GaleraMissing(); why != "" {
		SkipOrFail(t, why)
	}
	start := time.Now()
	// A short base path: the nodes' Unix sockets must fit in 108 bytes. The
	// rsync daemon of a state transfer runs as nobody when we are root, so
	// every directory on the way must be searchable.
	base, err := os.MkdirTemp("", "smgalera")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	g := &Galera{t: t, base: base, name: "smtest_" + RandomHex(t, 4), Eviction: GaleraEviction}
	// Each cluster has its own tmpdir: a mariadbd starting up deletes the
	// "#sql*" files of its tmpdir, which in /tmp are the live temporary
	// tables of the machine's other MariaDB servers (the tests' own).
	g.tmpdir = filepath.Join(base, "tmp")
	if err := os.MkdirAll(g.tmpdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(g.tmpdir, 0o1777); err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv(EnvGaleraOptions); ok {
		g.Eviction = v
		if v == "none" {
			g.Eviction = ""
		}
	}
	t.Cleanup(g.stop)

	ports := freePorts(t, 12)
	for i := range 3 {
		n := &GaleraNode{Index: i, g: g, datadir: filepath.Join(base, fmt.Sprintf("n%d", i)),
			sock: filepath.Join(base, fmt.Sprintf("n%d.sock", i)), gcomm: ports[4*i+1], ist: ports[4*i+2], sst: ports[4*i+3]}
		n.Addr = fmt.Sprintf("127.0.0.1:%d", ports[4*i])
		g.Nodes = append(g.Nodes, n)
	}

	// One data directory, bootstrapped once and shut down cleanly, so that
	// it carries the cluster's identity and position; its copies join by IST.
	first := g.Nodes[0]
	install := exec.Command("mariadb-install-db", "--no-defaults", "--user="+osUser(), "--datadir="+first.datadir,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M", "--tmpdir="+g.tmpdir)
	install.Env = append(os.Environ(), "TMPDIR="+g.tmpdir)
	out, err := install.CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	installed := time.Since(start)
	first.start(t, "--wsrep-new-cluster")
	first.waitSynced(t, 30*time.Second)
	first.term(t)
	bootstrapped := time.Since(start)
	for _, n := range g.Nodes[1:] {
		if err := copyDir(first.datadir, n.datadir); err != nil {
			t.Fatalf("copy the bootstrapped data directory: %v", err)
		}
		if err := setSafeToBootstrap(n.datadir, false); err != nil {
			t.Fatal(err)
		}
	}
	first.start(t, "--wsrep-new-cluster")
	first.waitSynced(t, 30*time.Second)
	steps := []string{fmt.Sprintf("installed %s, bootstrapped %s, node 0 up %s", installed.Round(time.Millisecond),
		bootstrapped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))}
	// The joiners overlap: node 2 starts once node 1 is in the group (its
	// state transfer under way), and waits for a free donor if need be.
	g.Nodes[1].start(t)
	g.waitMembers(t, 2, 60*time.Second)
	steps = append(steps, fmt.Sprintf("node 1 in the group %s", time.Since(start).Round(time.Millisecond)))
	g.Nodes[2].start(t)
	for _, n := range g.Nodes[1:] {
		// A join can fail in Galera itself on a loaded machine (a node left
		// "Initialized" and disconnected for good): as for a rejoin, the
		// node is then killed and started again (Restart).
		if !n.synced(time.Minute) {
			t.Logf("galera: node %d did not join within a minute; starting it again", n.Index)
			n.Restart(t)
		}
		steps = append(steps, fmt.Sprintf("node %d synced %s", n.Index, time.Since(start).Round(time.Millisecond)))
	}
	g.WaitSize(t, 3, 30*time.Second)
	g.StartedIn = time.Since(start)
	t.Logf("galera: three nodes synced in %s (%s; evs options %q)", g.StartedIn.Round(time.Millisecond),
		strings.Join(steps, ", "), g.Eviction)
	return g
}

// GaleraMissing says what StartGalera lacks on this machine (a program or
// the galera-4 provider), or "" when it can start a cluster: a test that
// runs a Galera part besides others can skip only that part.
func GaleraMissing() string {
	for _, bin := range []string{"mariadbd", "mariadb-install-db", "rsync", "wsrep_sst_rsync"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed (Debian: mariadb-server, galera-4, rsync), so the Galera cluster cannot run"
		}
	}
	if _, err := os.Stat(galeraProvider); err != nil {
		return galeraProvider + " is missing (Debian package galera-4), so the Galera cluster cannot run"
	}
	return ""
}

// DSN is a go-sql-driver DSN for database db (may be "") on node i, as root.
func (g *Galera) DSN(i int, db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", g.Nodes[i].Addr, db
	cfg.Timeout = 5 * time.Second
	return cfg.FormatDSN()
}

// CreateDatabase creates database name (utf8mb4, binary collation) through
// node 0; Galera replicates it to the others.
func (g *Galera) CreateDatabase(t testing.TB, name string) {
	t.Helper()
	db := g.open(t, 0, "")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("galera: create database %s: %v", name, err)
	}
}

func (g *Galera) open(t testing.TB, i int, dbName string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", g.DSN(i, dbName))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// WaitSize waits until every running, unfrozen node is synced and sees a
// primary component of size nodes.
func (g *Galera) WaitSize(t testing.TB, size int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		var last string
		for _, n := range g.Nodes {
			if !n.running() {
				continue
			}
			st, err := n.Status()
			if err != nil || st["wsrep_cluster_size"] != strconv.Itoa(size) || st["wsrep_ready"] != "ON" ||
				st["wsrep_local_state_comment"] != "Synced" {
				ok = false
				last = fmt.Sprintf("node %d: %v %v", n.Index, st, err)
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			g.logTails(t)
			t.Fatalf("galera: cluster of %d synced nodes not reached after %s (%s)", size, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMembers waits until node 0 sees size members in the group, synced or
// not.
func (g *Galera) waitMembers(t testing.TB, size int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := g.Nodes[0].Status()
		if err == nil && st["wsrep_cluster_size"] == strconv.Itoa(size) {
			return
		}
		if time.Now().After(deadline) {
			g.logTails(t)
			t.Fatalf("galera: node 0 does not see %d members after %s (%v %v)", size, timeout, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Status reads the node's wsrep status variables with a short timeout.
func (n *GaleraNode) Status() (map[string]string, error) {
	db, err := sql.Open("mysql", n.g.DSN(n.Index, ""))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW STATUS LIKE 'wsrep_%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[k] = v
	}
	return st, rows.Err()
}

// Kill sends SIGKILL to the node (frozen or not) and the helpers it started
// (its process group), and waits until it is gone.
func (n *GaleraNode) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	killGroup(cmd.Process)
	<-done
}

// Freeze stops the node with SIGSTOP: its connections stay open, nothing
// answers, its peers hear nothing.
func (n *GaleraNode) Freeze() { n.signal(syscall.SIGSTOP, true) }

// Thaw resumes a frozen node with SIGCONT.
func (n *GaleraNode) Thaw() { n.signal(syscall.SIGCONT, false) }

func (n *GaleraNode) signal(sig syscall.Signal, frozen bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
		n.frozen = frozen
	}
}

// Restart starts a killed node again and waits until it is synced: it
// recovers its position from InnoDB first (mariadbd --wsrep-recover, as
// mysqld_safe does), so it rejoins by IST instead of a full state transfer.
//
// On a loaded machine a rejoin can fail in Galera itself ("Sending JOIN
// failed: Connection was closed" after the IST, leaving the node in a
// non-primary view for good); as an operator would, the node is then killed
// and started again, up to five times.
func (n *GaleraNode) Restart(t testing.TB) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		n.Kill()
		n.prepareDataDir(t)
		logFile := filepath.Join(n.g.base, fmt.Sprintf("recover%d.log", n.Index))
		args := append(n.args(), "--wsrep-recover", "--log-error="+logFile)
		rec := exec.Command("mariadbd", args...)
		rec.Env = append(os.Environ(), "TMPDIR="+n.g.tmpdir)
		if out, err := rec.CombinedOutput(); err != nil {
			t.Fatalf("galera: node %d: mariadbd --wsrep-recover: %v\n%s", n.Index, err, out)
		}
		b, _ := os.ReadFile(logFile)
		m := recoveredRE.FindAllSubmatch(b, -1)
		if m == nil {
			t.Fatalf("galera: node %d: no recovered position in\n%s", n.Index, b)
		}
		n.start(t, "--wsrep-start-position="+string(m[len(m)-1][1]))
		// A CI machine running a second cluster and the race-instrumented
		// tests beside this one has needed more than three tries of 30 s.
		if attempt == 5 {
			n.waitSynced(t, 2*time.Minute)
			return
		}
		if n.synced(time.Minute) {
			return
		}
		t.Logf("galera: node %d did not rejoin within a minute (attempt %d); starting it again", n.Index, attempt)
	}
}

// synced waits up to timeout for the node to be synced with a primary
// component and reports whether it is.
func (n *GaleraNode) synced(timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !n.running() {
			return false
		}
		if st, err := n.Status(); err == nil && st["wsrep_ready"] == "ON" && st["wsrep_local_state_comment"] == "Synced" {
			return true
		}
	}
	return false
}

var recoveredRE = regexp.MustCompile(`WSREP: Recovered position: (\S+)`)

// args are the node's mariadbd arguments.
func (n *GaleraNode) args() []string {
	var cluster []string
	for _, o := range n.g.Nodes {
		cluster = append(cluster, fmt.Sprintf("127.0.0.1:%d", o.gcomm))
	}
	provider := fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M", n.gcomm, n.ist)
	if n.g.Eviction != "" {
		provider += ";" + n.g.Eviction
	}
	_, port, _ := net.SplitHostPort(n.Addr)
	return []string{"--no-defaults", "--user=" + osUser(), "--datadir=" + n.datadir,
		"--port=" + port, "--bind-address=127.0.0.1", "--socket=" + n.sock,
		"--pid-file=" + filepath.Join(n.g.base, fmt.Sprintf("n%d.pid", n.Index)), "--tmpdir=" + n.g.tmpdir,
		"--log-error=" + n.errLog(), "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M", "--innodb-flush-log-at-trx-commit=2",
		"--max-connections=300", "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin",
		"--wsrep-on=ON", "--wsrep-provider=" + galeraProvider, "--wsrep-cluster-name=" + n.g.name,
		"--wsrep-cluster-address=gcomm://" + strings.Join(cluster, ","),
		fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", n.gcomm),
		"--wsrep-node-incoming-address=" + n.Addr,
		fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", n.sst),
		"--wsrep-provider-options=" + provider,
		"--wsrep-sst-method=rsync", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
		"--default-storage-engine=InnoDB"}
}

func (n *GaleraNode) errLog() string {
	return filepath.Join(n.g.base, fmt.Sprintf("n%d.err", n.Index))
}

// start runs mariadbd on the node's data directory; the process dies with
// the test binary (galeraProcAttr) and at the test's end (Galera.stop).
func (n *GaleraNode) start(t testing.TB, extra ...string) {
	t.Helper()
	if n.Index > 0 {
		n.prepareDataDir(t)
	}
	cmd := exec.Command("mariadbd", append(n.args(), extra...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+n.g.tmpdir) // the SST scripts too
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = galeraProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("galera: start node %d: %v", n.Index, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done, n.frozen = cmd, done, false
	n.mu.Unlock()
}

// prepareDataDir hands a joiner's data directory to the user the rsync
// daemon of a state transfer runs as (nobody, when we are root).
func (n *GaleraNode) prepareDataDir(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(n.datadir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, -1)
	})
	if err != nil {
		t.Fatalf("galera: chown %s to nobody: %v", n.datadir, err)
	}
}

// running says whether the node's process is up and not frozen by the
// test (a frozen node answers nothing).
func (n *GaleraNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
	}
	return !n.frozen
}

// waitSynced waits until the node is synced with a primary component.
func (n *GaleraNode) waitSynced(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := n.Status()
		if err == nil && st["wsrep_ready"] == "ON" && st["wsrep_local_state_comment"] == "Synced" {
			return
		}
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			n.g.logTails(t)
			t.Fatalf("galera: node %d exited before it was synced", n.Index)
		default:
		}
		if time.Now().After(deadline) {
			n.g.logTails(t)
			t.Fatalf("galera: node %d not synced after %s (%v %v)", n.Index, timeout, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// term shuts the node down cleanly (SIGTERM) and waits.
func (n *GaleraNode) term(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		n.Kill()
		t.Fatalf("galera: node %d did not shut down within 30s of SIGTERM", n.Index)
	}
}

// stop kills every node and removes the cluster's files.
func (g *Galera) stop() {
	for _, n := range g.Nodes {
		n.Kill()
	}
	if g.t.Failed() {
		g.logTails(g.t)
	}
	if err := os.RemoveAll(g.base); err != nil {
		g.t.Errorf("galera: remove %s: %v", g.base, err)
	}
}

// logTails shows the end of every node's error log, once.
func (g *Galera) logTails(t testing.TB) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.Nodes {
		b, err := os.ReadFile(n.errLog())
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- galera node %d error log (end):\n%s", n.Index, strings.Join(lines, "\n"))
	}
}

// freePorts finds n free loopback TCP ports, held together so none repeats.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// osUser is the user mariadbd runs as: itself (root must say so).
func osUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

// copyDir copies the regular files and directories under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil // sockets, pid files' leftovers
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o660)
	})
}

// setSafeToBootstrap rewrites grastate.dat's safe_to_bootstrap flag: only the
// first node may bootstrap the cluster.
func setSafeToBootstrap(datadir string, safe bool) error {
	p := filepath.Join(datadir, "grastate.dat")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	v := "0"
	if safe {
		v = "1"
	}
	re := regexp.MustCompile(`(?m)^safe_to_bootstrap: \d`)
	if !re.Match(b) {
		return errors.New("galera: grastate.dat has no safe_to_bootstrap line")
	}
	return os.WriteFile(p, re.ReplaceAll(b, []byte("safe_to_bootstrap: "+v)), 0o660)
}
