package protocol

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
)

// Header names of the master/worker protocol, kept from ScheduleMaster where it had them.
const (
	HeaderNameTo     = "sm_nameto"
	HeaderTimestamp  = "sm_timestamp"
	HeaderNonce      = "sm_nonce"
	HeaderConnection = "sm_connection"
	HeaderMaster     = "sm_master"
	HeaderSecret     = "sm_secret"
	HeaderNode       = "sm_node"
	HeaderSignature  = "sm_signature"
	// HeaderNodeSignature carries a registration's Ed25519 signature made
	// with the node's own key (see SignRegistration).
	HeaderNodeSignature = "sm_node_signature"
)

// SecretMask replaces a secret value wherever it is shown; a task edit that
// sends it back keeps the stored value.
const SecretMask = "********"

// Worker and master API paths.
const (
	PathHealth      = "/health"
	PathConnect     = "/api/server/connect"
	PathStartup     = "/api/server/startup"
	PathShutdown    = "/api/server/shutdown"
	PathTaskStart   = "/api/task/start"
	PathTaskStop    = "/api/task/stop"
	PathTaskPause   = "/api/task/pause"
	PathTaskResume  = "/api/task/resume"
	PathTaskRunOnce = "/api/task/runonce"
	// PathTaskRunOnceBatch runs many tasks once in one call (delayed tasks
	// due together); a worker of an earlier version answers it 404.
	PathTaskRunOnceBatch = "/api/task/runonce/batch"
	// PathTaskBatch does one operation (start, stop, pause, resume) to many
	// tasks in one call (bulk actions); a worker of an earlier version
	// answers it 404.
	PathTaskBatch = "/api/task/batch"
	// PathStartupPart pushes a node's tasks in parts (a restarted master's
	// re-push): the parts of one session together are what PathStartup
	// carries in one body; a worker of an earlier version answers it 404.
	PathStartupPart    = "/api/server/startup/part"
	PathMasterRegister = "/api/worker/register"
	// PathMasterTasks gives a worker that registered with Parts the rest of
	// its tasks, a page at a time after a cursor (TasksPageRequest); a
	// master of an earlier version never sends a cursor, so it is never
	// asked.
	PathMasterTasks   = "/api/worker/tasks"
	PathMasterOffline = "/api/worker/offline"
	PathMasterClaim   = "/api/worker/claim"
	PathMasterRuns    = "/api/worker/runs"
	// PathMasterLock is the old name of PathMasterClaim, still served by the
	// master for workers of earlier versions.
	PathMasterLock = "/api/worker/lock"
)

// How long a worker waits for a master's answer, and so the bound a master
// keeps under: a master answers its workers' calls within less (its request
// deadlines), with a 503 when its database does not answer, so a worker hears
// "unavailable" rather than its own timeout.
const (
	// ClaimTimeout bounds a worker's claim of one fire, over every master
	// it tries.
	ClaimTimeout = 5 * time.Second
	// RunsTimeout bounds the delivery of one batch of run reports.
	RunsTimeout = 15 * time.Second
)

// Body limits of the worker API, enforced before parsing. A task definition
// is bounded by TaskDef.Validate (body 256 KiB, params 100 x 4 KiB, headers
// 50 x 8 KiB, env 100 x 4 KiB, command 16 KiB), under 2 MiB even with JSON
// escaping; startup and a registration answer carry all of a node's tasks.
const (
	MaxTaskBody    = 4 << 20
	MaxStartupBody = 64 << 20
	MaxSmallBody   = 16 << 10 // connect, stop, pause, resume, shutdown
	// MaxRunOnceBatchBody bounds a PathTaskRunOnceBatch body: a master
	// closes a batch well before (see MaxRunOnceBatch).
	MaxRunOnceBatchBody = 16 << 20
)

// MaxRunOnceBatch bounds the runs of one PathTaskRunOnceBatch call.
const MaxRunOnceBatch = 250

// Bounds of PathTaskBatch and PathStartupPart calls: the tasks of one call,
// and its body (a master closes a call well before, by its size).
const (
	MaxTaskBatch     = 1000
	MaxTaskBatchBody = 32 << 20
)

// MaxClockSkew is how far a signed timestamp may be from the receiver's clock.
const MaxClockSkew = 5 * time.Minute

// ClockSkewLimit is how far a node's clock may be from the master's before
// the console and the API flag the node with a clock skew (the skew
// allowance of claims is of the same order: a skewed clock fires early or
// late).
const ClockSkewLimit = time.Second

// ClockSkew is how far a node's clock, which read nodeTime, is ahead of the
// master's (negative: behind), when the master sent its request at sent and
// had the answer at received: the node read its clock somewhere between the
// two, taken to be their midpoint, so the round trip cancels out. A
// registration, which has no round trip, passes the time it came as both.
func ClockSkew(nodeTime, sent, received time.Time) time.Duration {
	mid := sent.Add(received.Sub(sent) / 2)
	return nodeTime.Sub(mid)
}

// ClockSkewed reports whether a skew is beyond ClockSkewLimit either way.
func ClockSkewed(skew time.Duration) bool { return skew > ClockSkewLimit || skew < -ClockSkewLimit }

// Limits on node configuration values.
const (
	MaxNameLen  = 64
	MaxPriority = 1000
	// DefaultPriority is a worker's priority unless an admin raises it; a
	// machine registering itself never declares more.
	DefaultPriority   = 1
	MaxMaxConcurrency = 10000
)

// HealthResponse is the body of GET /health.
type HealthResponse struct {
	Node         string `json:"node"`
	BootID       string `json:"boot_id"`
	Status       string `json:"status"`
	RunningTasks int    `json:"running_tasks"`
	// AllowShell says whether the worker runs shell tasks (--allow-shell);
	// absent from older workers.
	AllowShell *bool `json:"allow_shell,omitempty"`
	// AllowTypes lists the task types beyond HTTP and shell the worker runs
	// (--allow-types), sorted; nil from older workers, which run none.
	AllowTypes []string `json:"allow_types,omitempty"`
	// Degraded says why the worker works with less than it should, for
	// example "data directory full: runs.spool: ..." when it cannot write
	// its run journal or fires file; empty when all is well (and from older
	// workers).
	Degraded string `json:"degraded,omitempty"`
	// Labels are the worker's own labels (--labels), which task selectors
	// match; absent when it has none (and from older workers). The master
	// reads them at every probe, so a restart with other labels counts.
	Labels Labels `json:"labels,omitempty"`
	// Version is the build the node runs (version, commit, build date, Go
	// version), for operators and upgrade checks; absent from older nodes.
	Version *buildinfo.Info `json:"version,omitempty"`
	// WorkerTimeMS is the worker's clock when it answered, in Unix
	// milliseconds: the master measures the node's clock skew from it
	// (ClockSkew); absent from older workers.
	WorkerTimeMS int64 `json:"worker_time_ms,omitempty"`
}

// Worker states reported by /health.
const (
	StateWaiting    = "waiting"    // manual mode, not connected yet
	StateIdle       = "idle"       // connected, not scheduling
	StateScheduling = "scheduling" // running its tasks
)

// NodeConfig is a node's configuration as the master stores it and sends it.
type NodeConfig struct {
	Name           string `json:"name"`
	Protocol       string `json:"protocol"`
	Host           string `json:"host"`
	Priority       int    `json:"priority"`
	MaxConcurrency int    `json:"max_concurrency"`
}

// ConnectRequest is the body of POST /api/server/connect: the configuration the worker adopts.
type ConnectRequest struct {
	Node NodeConfig `json:"node"`
}

// ConnectResponse answers a successful Connect.
type ConnectResponse struct {
	Node   string `json:"node"`
	Secret string `json:"secret"`
	BootID string `json:"boot_id"`
}

// StartupRequest is the body of POST /api/server/startup.
type StartupRequest struct {
	Tasks []TaskSpec `json:"tasks"`
	// DownNoticed: the master saw this node not running (offline or idle)
	// before this push, so it accounts for the fires its tasks missed
	// meanwhile (its misfire windows); the worker must not count them again
	// from the last fires its previous process kept.
	DownNoticed bool `json:"down_noticed,omitempty"`
	// DownSince, with DownNoticed, is when the master's misfire windows
	// begin for this node's tasks (when it saw the node stop running): the
	// worker counts the fires its previous process missed up to it, the
	// master from it on, so a restart the master noticed late (it was down
	// itself) loses no fire and counts none twice. Without it (an older
	// master) the worker counts none.
	DownSince *time.Time `json:"down_since,omitempty"`
	// RunningSince, with DownNoticed, is when the master recorded this node
	// running again: its misfire windows for the node's tasks end there. The
	// fires after it that come before the worker schedules the task again
	// (the time the answer takes) are the worker's to count.
	RunningSince *time.Time `json:"running_since,omitempty"`
}

// StartupPartRequest is the body of POST /api/server/startup/part: one part
// of a push of a node's tasks. A part with First begins a session (the
// DownNoticed fields are read there, as StartupRequest's); each part's tasks
// are scheduled at once; the part with Last ends it, and the worker drops
// the tasks no part of the session named. A part of a session the worker
// does not hold (another push began since) is refused with 409.
type StartupPartRequest struct {
	Session      string     `json:"session"`
	First        bool       `json:"first,omitempty"`
	Last         bool       `json:"last,omitempty"`
	Tasks        []TaskSpec `json:"tasks"`
	DownNoticed  bool       `json:"down_noticed,omitempty"`
	DownSince    *time.Time `json:"down_since,omitempty"`
	RunningSince *time.Time `json:"running_since,omitempty"`
}

// Operations of a PathTaskBatch call.
const (
	BatchStart  = "start"
	BatchStop   = "stop"
	BatchPause  = "pause"
	BatchResume = "resume"
)

// TaskBatchRequest is the body of POST /api/task/batch: Op done to each of
// Tasks (start: full definitions) or IDs (stop, pause, resume), at most
// MaxTaskBatch.
type TaskBatchRequest struct {
	Op    string     `json:"op"`
	Tasks []TaskSpec `json:"tasks,omitempty"`
	IDs   []string   `json:"ids,omitempty"`
}

// TaskBatchReply answers a batch task by task, in its order.
type TaskBatchReply struct {
	Results []TaskBatchResult `json:"results"`
}

// TaskBatchResult is one task of a batch: done (200), or refused with the
// status and error the call for that task alone would have answered.
type TaskBatchResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// RegisterRequest is the body of POST /api/worker/register (auto-registration).
type RegisterRequest struct {
	Node        NodeConfig `json:"node"`
	MachineName string     `json:"machine_name"`
	Secret      string     `json:"secret"`
	BootID      string     `json:"boot_id"`
	// NodeKey is the hex Ed25519 public key of this node, created on its
	// first registration and kept in its data dir. The master binds the name
	// to it on first use; later registrations of the name must be signed
	// with it (header sm_node_signature).
	NodeKey string `json:"node_key"`
	// Labels are the worker's own labels (--labels), already validated by
	// it; a master validates them again (Labels.Validate).
	Labels Labels `json:"labels,omitempty"`
	// Parts says the worker takes its tasks in parts: the answer carries at
	// most one page of them and, with More, the cursor of the rest, which
	// the worker fetches from PathMasterTasks. Without it (a worker of an
	// earlier version) the answer carries every task. A master of an
	// earlier version refuses the field as unknown; the worker then
	// registers again without it.
	Parts bool `json:"parts,omitempty"`
	// WorkerTimeMS is the worker's clock when it sent the registration, in
	// Unix milliseconds, for the master's measure of its clock skew. It is
	// sent only with Parts (after it, so a master of an earlier version
	// names "parts" as the unknown field, and the registration again
	// without Parts carries neither).
	WorkerTimeMS int64 `json:"worker_time_ms,omitempty"`
}

// RegisterResponse answers a registration: the cluster's name (what
// --workerof names) and the node's running tasks (all of them, or with More
// the first page).
type RegisterResponse struct {
	Master string     `json:"master"`
	Tasks  []TaskSpec `json:"tasks"`
	// DownNoticed, DownSince and RunningSince are StartupRequest's for the
	// tasks above and for those of every page fetched after them.
	DownNoticed  bool       `json:"down_noticed,omitempty"`
	DownSince    *time.Time `json:"down_since,omitempty"`
	RunningSince *time.Time `json:"running_since,omitempty"`
	// More says the node has tasks after Tasks: the worker fetches them
	// from PathMasterTasks, from After on. Only a registration with Parts
	// gets it.
	More  bool   `json:"more,omitempty"`
	After string `json:"after,omitempty"`
}

// TasksPageRequest is the body of POST /api/worker/tasks (authenticated by
// sm_node and sm_secret): the node's running and paused tasks after the
// cursor After, at most Limit of them (at most MaxTaskBatch; 0 is
// MaxTaskBatch).
type TasksPageRequest struct {
	After string `json:"after"`
	Limit int    `json:"limit,omitempty"`
}

// TasksPageResponse is one page of a node's tasks, in key order; More says
// there are tasks after it, from After on.
type TasksPageResponse struct {
	Tasks []TaskSpec `json:"tasks"`
	More  bool       `json:"more,omitempty"`
	After string     `json:"after,omitempty"`
}

// MaxCursorLen bounds a TasksPageRequest's cursor (a task id).
const MaxCursorLen = 128

// PageTimeout is how long a worker waits for a page of n tasks (a
// registration answer with Parts, a TasksPageResponse): a master answers
// within less (PageTimeout less a second).
func PageTimeout(n int) time.Duration {
	return 10*time.Second + time.Duration(n)*200*time.Microsecond
}

// ErrorResponse is the JSON error body of every API.
type ErrorResponse struct {
	Error string `json:"error"`
}

// FieldErrors maps a field name to what is wrong with it.
type FieldErrors map[string]string

// Error lists the problems in a stable order.
func (f FieldErrors) Error() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + f[k]
	}
	return strings.Join(parts, "; ")
}

// Unwrap makes FieldErrors match ErrInvalid.
func (f FieldErrors) Unwrap() error { return ErrInvalid }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidateName checks a node name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.
func ValidateName(name string) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is longer than %d characters", MaxNameLen)
	case !nameRE.MatchString(name):
		return "may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit"
	}
	return ""
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// ValidateHost checks an "ip:port" or "hostname:port" address.
func ValidateHost(host string) string {
	if host == "" {
		return "is required"
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		return "must be host:port, e.g. 10.0.0.5:30001"
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "port must be a number from 1 to 65535"
	}
	if h == "" {
		return "host part is empty"
	}
	if net.ParseIP(h) == nil && (len(h) > 253 || !hostnameRE.MatchString(h)) {
		return fmt.Sprintf("%q is not a valid IP address or host name", h)
	}
	return ""
}

// Validate checks every field and returns FieldErrors, or nil.
func (c NodeConfig) Validate() error {
	fe := FieldErrors{}
	if msg := ValidateName(c.Name); msg != "" {
		fe["name"] = msg
	}
	if c.Protocol != "http" && c.Protocol != "https" {
		fe["protocol"] = "must be http or https"
	}
	if msg := ValidateHost(c.Host); msg != "" {
		fe["host"] = msg
	}
	if c.Priority < 0 || c.Priority > MaxPriority {
		fe["priority"] = fmt.Sprintf("must be from 0 to %d", MaxPriority)
	}
	if c.MaxConcurrency < 1 || c.MaxConcurrency > MaxMaxConcurrency {
		fe["max_concurrency"] = fmt.Sprintf("must be from 1 to %d", MaxMaxConcurrency)
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

// NewSecret returns 32 random bytes, hex encoded.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("protocol: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b)
}

// NewNonce returns 16 random bytes, hex encoded.
func NewNonce() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("protocol: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func mac(key string, parts ...string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(m.Sum(nil))
}

// ConnectMAC is the sm_connection value: hex(HMAC-SHA256(key, master\nnode\ntimestamp\nnonce)).
func ConnectMAC(key, master, node, timestamp, nonce string) string {
	return mac(key, master, node, timestamp, nonce)
}

// RegisterMAC signs a registration: the node, timestamp, nonce and a hash of the body.
func RegisterMAC(key, node, timestamp, nonce string, body []byte) string {
	sum := sha256.Sum256(body)
	return mac(key, "register", node, timestamp, nonce, hex.EncodeToString(sum[:]))
}

// registrationPayload is what a node key signs: the same facts as RegisterMAC.
func registrationPayload(node, timestamp, nonce string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(strings.Join([]string{"register-node-key", node, timestamp, nonce, hex.EncodeToString(sum[:])}, "\n"))
}

// SignRegistration signs a registration with the node's own Ed25519 key; the
// hex signature goes in HeaderNodeSignature.
func SignRegistration(key ed25519.PrivateKey, node, timestamp, nonce string, body []byte) string {
	return hex.EncodeToString(ed25519.Sign(key, registrationPayload(node, timestamp, nonce, body)))
}

// VerifyRegistration checks a registration's node-key signature against the
// hex public key pubHex.
func VerifyRegistration(pubHex, sigHex, node, timestamp, nonce string, body []byte) bool {
	pub, err := hex.DecodeString(pubHex)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), registrationPayload(node, timestamp, nonce, body), sig)
}

// EqualMAC compares two hex MACs in constant time.
func EqualMAC(got, want string) bool {
	g, err1 := hex.DecodeString(got)
	w, err2 := hex.DecodeString(want)
	return err1 == nil && err2 == nil && hmac.Equal(g, w)
}

// EqualSecret compares secrets in constant time, also when their lengths differ.
func EqualSecret(got, want string) bool {
	if want == "" {
		return false
	}
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(want))
	return hmac.Equal(g[:], w[:])
}

// CheckTimestamp parses a Unix-seconds timestamp and checks it is within MaxClockSkew of now.
func CheckTimestamp(ts string, now time.Time) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp is not a number", ErrHandshake)
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > MaxClockSkew || d < -MaxClockSkew {
		return fmt.Errorf("%w: timestamp is stale or in the future (clock skew over %s)", ErrHandshake, MaxClockSkew)
	}
	return nil
}

// TaskReply answers a task operation on the worker API (start, stop, pause,
// resume, runonce): the task and its state there.
type TaskReply struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// TaskReply statuses.
const (
	ReplyStarted = "started" // start: scheduled; runonce: the run began
	ReplyStopped = "stopped"
	ReplyPaused  = "paused"
	ReplyRunning = "running" // resumed
)
