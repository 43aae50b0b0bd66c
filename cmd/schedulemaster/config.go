package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/ldapauth"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// Limits of the values an operator may set.
const (
	minClusterKeyLen = 16
	maxTokenNameLen  = master.TokenNameMax
)

// lookupEnvFunc is os.LookupEnv, or a map in tests.
type lookupEnvFunc func(string) (string, bool)

// masterConfig is the validated configuration of `schedulemaster master`.
type masterConfig struct {
	Listen   string    // bind address of the console and API
	DB       string    // --db as given
	DSN      store.DSN // DB parsed, SQLite placed in DataDir
	DataDir  string
	Identity string // the master's node name
	// Cluster names the cluster of masters; workers' --workerof names it.
	Cluster       string
	AdminPassword string // first start only; empty means random
	ClusterKey    string // empty means the stored (or newly generated) key
	// Advertise is the host:port recorded for the master's own node; empty
	// means derive it from the bound listener.
	Advertise string
	TLSCert   string // with TLSKey: serve HTTPS
	TLSKey    string

	HealthInterval time.Duration
	HealthTimeout  time.Duration
	MaxFailures    int
	// The health settings given by flag, env or file; the engine pins them
	// (master.Pinned), the others fall back to the stored settings before
	// master.DefaultSettings.
	HealthIntervalSet, HealthTimeoutSet, MaxFailuresSet bool

	// TrustedProxies is --trusted-proxies as given (comma-separated IPs or
	// CIDRs); Proxies the parsed list. Empty: no proxy is believed.
	TrustedProxies string
	Proxies        []string

	// Limits of the HTTP server; zero means the default (see httpLimits).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                         int

	// OIDC is sign-on with an OpenID Connect provider (config_oidc.go).
	OIDC oidcConfig
	// LDAP is the directory for console sign-in; nil means local users only.
	LDAP     *ldapauth.Config
	ldapOpts *ldapOptions
}

// TLS reports whether the master serves HTTPS.
func (c masterConfig) TLS() bool { return c.TLSCert != "" }

const masterSynopsis = "master [flags]"

func masterOptions(c *masterConfig) *options {
	o := newOptions("master", "Master")
	o.add(&option{name: "listen", key: "Listen", def: ":30000", dst: &c.Listen, usage: "address to serve the console and API on"})
	o.add(&option{name: "db", key: "DB", dst: &c.DB, usage: "database: empty for SQLite in the data dir, sqlite://PATH, mysql://user:pass@tcp(host:3306)/db (MariaDB, MySQL, Galera) or postgres://user:pass@host:5432/db?sslmode=… (also postgresql://)"})
	o.add(&option{name: "data-dir", key: "DataDir", def: "./data", dst: &c.DataDir, usage: "directory for the SQLite database"})
	o.add(&option{name: "identity", key: "Identity", def: "master", dst: &c.Identity, usage: "the master's node name"})
	o.add(&option{name: "cluster", key: "Cluster", def: master.DefaultCluster, dst: &c.Cluster,
		usage: "the cluster's name, the same on every master of one database (what workers' --workerof names)"})
	o.add(&option{name: "admin-password", key: "AdminPassword", dst: &c.AdminPassword, usage: "password of user admin, created on first start (default: random, printed once)"})
	o.add(&option{name: "cluster-key", key: "ClusterKey", dst: &c.ClusterKey, usage: "key shared with workers (default: generated on first start and stored)"})
	def := master.DefaultSettings()
	o.add(&option{name: "health-interval", key: "HealthInterval", def: def.HealthInterval.String(), dst: &c.HealthInterval,
		min: int64(master.MinHealthInterval), max: int64(master.MaxHealthInterval), usage: "time between health sweeps (overrides the stored setting)"})
	o.add(&option{name: "health-timeout", key: "HealthTimeout", def: def.HealthTimeout.String(), dst: &c.HealthTimeout,
		min: int64(master.MinHealthTimeout), max: int64(master.MaxHealthTimeout), usage: "timeout of one health probe (overrides the stored setting)"})
	o.add(&option{name: "max-failures", key: "MaxFailures", def: strconv.Itoa(def.MaxFailures), dst: &c.MaxFailures,
		min: master.MinMaxFailures, max: master.MaxMaxFailures, usage: "failed probes in a row before a node goes offline (overrides the stored setting)"})
	o.add(&option{name: "advertise", key: "Advertise", dst: &c.Advertise, usage: "host:port recorded for the master's own node (default: from --listen, 127.0.0.1 for an unspecified host)"})
	o.add(&option{name: "tls-cert", key: "TLSCert", dst: &c.TLSCert, usage: "TLS certificate file; with --tls-key serves HTTPS"})
	o.add(&option{name: "tls-key", key: "TLSKey", dst: &c.TLSKey, usage: "TLS private key file"})
	o.add(&option{name: "trusted-proxies", key: "TrustedProxies", dst: &c.TrustedProxies,
		usage: "comma-separated IPs or CIDRs of reverse proxies whose X-Forwarded-For is believed (default: none, the client is the TCP peer)"})
	c.ldapOpts = &ldapOptions{}
	addLDAPOptions(o, c.ldapOpts)
	o.add(&option{name: "read-timeout", key: "ReadTimeout", def: defReadTimeout.String(), dst: &c.ReadTimeout, min: int64(100 * time.Millisecond), max: int64(10 * time.Minute),
		usage: "time to read one request, body included (a trickling client is cut off after it)"})
	addOIDCOptions(o, &c.OIDC)
	return o
}

// parseMasterConfig parses and validates the master's flags, env and config file.
func parseMasterConfig(args []string, lookupEnv lookupEnvFunc) (masterConfig, *options, error) {
	var c masterConfig
	o := masterOptions(&c)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	bad := func(name, format string, a ...any) {
		problems = append(problems, o.where(name)+": "+fmt.Sprintf(format, a...))
	}
	if err := validListen(c.Listen); err != "" {
		bad("listen", "%s", err)
	}
	if c.DataDir == "" {
		bad("data-dir", "is empty")
	}
	dsn, err := store.ParseDSN(c.DB, c.DataDir)
	if err != nil {
		bad("db", "%s", strings.TrimPrefix(err.Error(), "store: --db: "))
	}
	c.DSN = dsn
	if msg := protocol.ValidateName(c.Identity); msg != "" {
		bad("identity", "%s", msg)
	}
	if msg := protocol.ValidateName(c.Cluster); msg != "" {
		bad("cluster", "%s", msg)
	}
	if c.AdminPassword != "" {
		// The same rule as every user's password, written once in the engine.
		if msg := master.CheckPassword(c.AdminPassword); msg != "" {
			bad("admin-password", "%s", msg)
		}
	}
	if c.ClusterKey != "" {
		if msg := validClusterKey(c.ClusterKey); msg != "" {
			bad("cluster-key", "%s", msg)
		}
	}
	if c.Advertise != "" {
		if msg := protocol.ValidateHost(c.Advertise); msg != "" {
			bad("advertise", "%s", msg)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		problems = append(problems, "--tls-cert and --tls-key go together: give both or neither")
	}
	if proxies, msg := parseTrustedProxies(c.TrustedProxies); msg != "" {
		bad("trusted-proxies", "%s", msg)
	} else {
		c.Proxies = proxies
	}
	problems = append(problems, c.OIDC.validate(o)...)
	if ldapCfg, msgs := c.ldapOpts.ldapConfig(o); len(msgs) > 0 {
		problems = append(problems, msgs...)
	} else {
		c.LDAP = ldapCfg
	}
	c.HealthIntervalSet = o.explicit("health-interval")
	c.HealthTimeoutSet = o.explicit("health-timeout")
	c.MaxFailuresSet = o.explicit("max-failures")
	if len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// workerConfig is the validated configuration of `schedulemaster worker`.
type workerConfig struct {
	Listen        string // bind address; may differ from the IP:Port the master uses
	worker.Config        // what the engine needs
	// ReadTimeout bounds reading one request, body included: a trickling
	// client is cut off after it.
	ReadTimeout time.Duration
	// MetricsListen, when set, serves GET /metrics without the secret on an
	// address of its own (e.g. 127.0.0.1:9101, or a port only Prometheus reaches).
	MetricsListen string
	// LabelsText is --labels as given ("pool=billing,zone=eu-1"); Labels
	// (in worker.Config) holds it parsed.
	LabelsText string
	// AllowTypesText is --allow-types as given ("nats,sql"); AllowTypes
	// (in worker.Config) holds it parsed.
	AllowTypesText string
	// Warnings are settings that work but are likely a mistake, logged at start.
	Warnings []string
}

// clockOffsetEnv, for tests only, sets the worker's clock that far off the
// real one (a duration: "3s" ahead, "-2s" behind), to play a machine whose
// clock is skewed; it is no flag and off by default.
const clockOffsetEnv = "SM_WORKER_CLOCK_OFFSET"

const workerSynopsis = "worker --identity NAME --master URL --cluster-key KEY [flags]"

func workerOptions(c *workerConfig) *options {
	o := newOptions("worker", "NodeSetting")
	o.add(&option{name: "listen", key: "Listen", dst: &c.Listen, usage: "address to bind (default \":\" + --port)"})
	o.add(&option{name: "port", key: "Port", def: "30001", dst: &c.Port, min: 0, max: 65535, usage: "port the master reaches this worker on, and the one bound when --listen is not set (0: any free port; with --listen alone, its port)"})
	o.add(&option{name: "identity", key: "IdentityName", dst: &c.Identity, usage: "node name (required unless --autor=false)"})
	o.add(&option{name: "protocol", key: "Protocol", def: "http", dst: &c.Protocol, usage: "protocol the master uses to reach this worker: http or https"})
	o.add(&option{name: "ip", key: "IP", def: "127.0.0.1", dst: &c.IP, usage: "IP or host name the master reaches this worker on"})
	o.add(&option{name: "priority", key: "Priority", def: "1", dst: &c.Priority, min: 0, max: protocol.MaxPriority, usage: "weight when the master picks a worker"})
	o.add(&option{name: "maxc", key: "MaxConcurrency", def: "20", dst: &c.MaxConcurrency, min: 1, max: protocol.MaxMaxConcurrency, usage: "max concurrently running jobs"})
	o.add(&option{name: "master", key: "Master", dst: &c.MasterURL, usage: "master URL http(s)://host[:port], or a comma-separated list of every master's URL: calls fail over along it (required)"})
	o.add(&option{name: "cluster-key", key: "ClusterKey", dst: &c.ClusterKey, usage: "the master's cluster key (required)"})
	o.add(&option{name: "autor", key: "AutoRegister", def: "true", dst: &c.AutoRegister,
		env: []string{"SM_AUTOR", "SMCORE_AUTOR"}, looseEnvBool: true,
		usage: "register with the master at start; env: on unless exactly \"false\""})
	o.add(&option{name: "workerof", key: "WorkerOf", dst: &c.WorkerOf, env: []string{"SM_WORKEROF", "SMCORE_WORKEROF"},
		usage: "name of the master allowed to connect (required with --autor=false)"})
	o.add(&option{name: "allow-shell", key: "AllowShell", def: "false", dst: &c.AllowShell, usage: "allow shell tasks (remote command execution)"})
	o.add(&option{name: "allow-types", key: "AllowTypes", dst: &c.AllowTypesText,
		usage: "task types beyond http and shell this worker runs, comma-separated (" + strings.Join(protocol.GatedTypes(), ", ") + "; default none): each reaches other systems with the credentials of its connection"})
	o.add(&option{name: "data-dir", key: "DataDir", dst: &c.DataDir, usage: "directory for the run-report spool and the node key (default ./data/worker-<identity>)"})
	o.add(&option{name: "read-timeout", key: "ReadTimeout", def: "30s", dst: &c.ReadTimeout, min: int64(100 * time.Millisecond), max: int64(10 * time.Minute),
		usage: "time to read one request to the worker API, body included"})
	o.add(&option{name: "metrics-listen", key: "MetricsListen", dst: &c.MetricsListen,
		usage: "address to serve Prometheus metrics on at /metrics, without the secret (default: none; the worker API serves them behind sm_secret)"})
	o.add(&option{name: "labels", key: "Labels", dst: &c.LabelsText, fileObject: labelsObject,
		usage: fmt.Sprintf("this worker's labels, key=value comma-separated (e.g. pool=billing,zone=eu-1; at most %d), which task selectors match; "+
			"in the config file also a JSON object {\"pool\": \"billing\"}", protocol.MaxLabels)})
	o.add(&option{name: "drain-timeout", key: "DrainTimeout", def: "30s", dst: &c.StopTimeout, min: int64(time.Second), max: int64(24 * time.Hour),
		usage: "on SIGTERM/SIGINT the worker takes no new fire and gives the runs in progress this long to end; " +
			"those still going are then killed and reported as killed (also bounds an admin's Disable)"})
	return o
}

// labelsObject reads a Labels object of the config file ({"pool": "billing"})
// as --labels text; each label is checked as it is, so that a value holding
// a comma cannot turn into two labels.
func labelsObject(raw json.RawMessage) (string, error) {
	bad := errors.New(`must be "key=value,key=value" or an object of strings, e.g. {"pool": "billing"}`)
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", bad
	}
	l := protocol.Labels{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return "", bad
		}
		k, _ := kt.(string)
		vt, err := dec.Token()
		v, isString := vt.(string)
		if err != nil || !isString {
			return "", bad
		}
		if _, dup := l[k]; dup {
			return "", fmt.Errorf("label key %q is given twice", k)
		}
		l[k] = v
		if len(l) > protocol.MaxLabels {
			break // Validate says so
		}
	}
	if err := l.Validate(); err != nil {
		return "", err
	}
	return l.String(), nil
}

// parseWorkerConfig parses and validates the worker's flags, env and config file.
func parseWorkerConfig(args []string, lookupEnv lookupEnvFunc) (workerConfig, *options, error) {
	var c workerConfig
	o := workerOptions(&c)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	bad := func(name, format string, a ...any) {
		problems = append(problems, o.where(name)+": "+fmt.Sprintf(format, a...))
	}
	if c.Listen == "" {
		c.Listen = ":" + strconv.Itoa(c.Port)
	} else if msg := validListen(c.Listen); msg != "" {
		bad("listen", "%s", msg)
	} else {
		_, p, _ := net.SplitHostPort(c.Listen)
		lp, _ := strconv.Atoi(p)
		switch {
		case !o.explicit("port"):
			// --listen alone: the master reaches the worker on the port it
			// binds (0: the port the kernel picks), not on --port's default.
			c.Port = lp
		case lp != 0 && lp != c.Port:
			// Behind a port mapping or proxy this is right; otherwise the
			// master probes a port nobody listens on and marks the node
			// unreachable, so say it once at start.
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s binds port %d but the master is told to reach this worker on port %d (%s): "+
				"unless a proxy or port mapping forwards %d to %d, drop --port (it then follows --listen) or make both the same",
				o.where("listen"), lp, c.Port, o.where("port"), c.Port, lp))
		}
	}
	if c.MetricsListen != "" {
		if msg := validListen(c.MetricsListen); msg != "" {
			bad("metrics-listen", "%s", msg)
		} else if sameListen(c.MetricsListen, c.Listen) {
			bad("metrics-listen", "%q is the worker API's address: pick another port", c.MetricsListen)
		}
	}
	if c.AutoRegister || c.Identity != "" {
		if msg := protocol.ValidateName(c.Identity); msg != "" {
			if c.Identity == "" {
				msg = "is required when the worker registers itself (or use --autor=false --workerof MASTER)"
			}
			bad("identity", "%s", msg)
		}
	}
	if c.Protocol != "http" && c.Protocol != "https" {
		bad("protocol", "%q must be http or https", c.Protocol)
	}
	if types, msg := parseAllowTypes(c.AllowTypesText); msg != "" {
		bad("allow-types", "%s", msg)
	} else {
		c.AllowTypes = types
	}
	// Validate the host exactly as the worker will announce it (port 0 is
	// replaced by the picked port before that).
	announced := c.Config
	if announced.Port == 0 {
		announced.Port = 1
	}
	if msg := protocol.ValidateHost(announced.Host()); msg != "" {
		bad("ip", "%s", msg)
	}
	if msg := validMasterURLs(c.MasterURL); msg != "" {
		bad("master", "%s", msg)
	}
	if msg := validClusterKey(c.ClusterKey); msg != "" {
		bad("cluster-key", "%s", msg)
	}
	if c.WorkerOf != "" {
		if msg := protocol.ValidateName(c.WorkerOf); msg != "" {
			bad("workerof", "%s", msg)
		}
	} else if !c.AutoRegister {
		bad("workerof", "is required when --autor=false: name the master allowed to connect")
	}
	if l, err := protocol.ParseLabels(c.LabelsText); err != nil {
		bad("labels", "%v", err)
	} else if len(l) > 0 {
		c.Labels = l
	}
	if c.DataDir == "" {
		c.DataDir = "./data/worker"
		if c.Identity != "" {
			c.DataDir += "-" + c.Identity
		}
	}
	if v, ok := lookupEnv(clockOffsetEnv); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d.Abs() > time.Hour {
			problems = append(problems, clockOffsetEnv+": "+strconv.Quote(v)+" must be a duration within an hour either way (e.g. 3s, -1.5s)")
		} else if d != 0 {
			c.Now = worker.OffsetClock(d)
		}
	}
	if len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// tokenConfig is the configuration of `schedulemaster token create`.
type tokenConfig struct {
	Name      string // what the token is for
	User      string // whose token it is: it acts with this user's role
	Expires   string // optional expiry, as master.ParseTokenExpiry reads it
	ExpiresAt time.Time
	DB        string
	DataDir   string
	DSN       store.DSN // DB parsed, SQLite placed in DataDir
}

const tokenSynopsis = "token create --name NAME [--user USER] [--expires-at TIME] [--db DSN] [--data-dir DIR] [--config FILE]"

func tokenOptions(c *tokenConfig) *options {
	o := newOptions("token create", "Master")
	o.add(&option{name: "name", noEnv: true, dst: &c.Name, usage: "what the token is for (1 to 64 characters)"})
	o.add(&option{name: "user", noEnv: true, def: "admin", dst: &c.User, usage: "the user the token acts as (with that user's role at every request)"})
	o.add(&option{name: "expires-at", noEnv: true, dst: &c.Expires, usage: "when the token stops working: RFC 3339 or a date (default: never)"})
	o.add(&option{name: "db", key: "DB", dst: &c.DB, usage: "database, as for the master"})
	o.add(&option{name: "data-dir", key: "DataDir", def: "./data", dst: &c.DataDir, usage: "directory of the SQLite database, as for the master"})
	// The master's config file works here too; its other keys are not ours.
	var mc masterConfig
	for _, opt := range masterOptions(&mc).list {
		if opt.key != "" && opt.key != "DB" && opt.key != "DataDir" {
			o.ignoredKeys = append(o.ignoredKeys, opt.key)
		}
	}
	return o
}

// parseTokenConfig parses and validates the flags of `token create`.
func parseTokenConfig(args []string, lookupEnv lookupEnvFunc) (tokenConfig, *options, error) {
	var c tokenConfig
	o := tokenOptions(&c)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if msg := validTokenName(c.Name); msg != "" {
		problems = append(problems, "--name: "+msg)
	}
	if msg := master.CheckUsername(c.User); msg != "" {
		problems = append(problems, "--user: "+msg)
	}
	if exp, err := master.ParseTokenExpiry(c.Expires); err != nil {
		problems = append(problems, "--expires-at: "+err.Error())
	} else if fe := (master.NewToken{Name: "x", ExpiresAt: exp}).Check(time.Now()); fe != nil {
		problems = append(problems, "--expires-at: "+fe["expires_at"])
	} else {
		c.ExpiresAt = exp
	}
	dsn, err := store.ParseDSN(c.DB, c.DataDir)
	if err != nil {
		problems = append(problems, o.where("db")+": "+strings.TrimPrefix(err.Error(), "store: --db: "))
	}
	c.DSN = dsn
	if len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// sameListen reports whether two listen addresses bind the same port on a
// shared host (an empty host binds them all); port 0 picks a free one.
func sameListen(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	return ha == hb || ha == "" || hb == "" || ha == "0.0.0.0" || hb == "0.0.0.0" || ha == "::" || hb == "::"
}

func validListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q must be [host]:port, e.g. :30000 or 127.0.0.1:30000", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q: port must be a number from 0 to 65535", addr)
	}
	return ""
}

func validClusterKey(key string) string {
	switch {
	case key == "":
		return "is required (the master shows it on the Nodes page)"
	case len(key) < minClusterKeyLen:
		return fmt.Sprintf("must be at least %d characters", minClusterKeyLen)
	case strings.TrimSpace(key) != key:
		return "has leading or trailing spaces"
	}
	return ""
}

// validMasterURLs accepts one master URL or a comma-separated list of them,
// each as validMasterURL wants it, none empty and none twice.
func validMasterURLs(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return validMasterURL("")
	}
	seen := map[string]bool{}
	for _, u := range worker.MasterURLs(raw) {
		if u == "" {
			return fmt.Sprintf("%q has an empty entry: separate the URLs by single commas", raw)
		}
		if msg := validMasterURL(u); msg != "" {
			return msg
		}
		if seen[strings.ToLower(u)] {
			return fmt.Sprintf("lists %q twice", u)
		}
		seen[strings.ToLower(u)] = true
	}
	return ""
}

// validMasterURL accepts http(s)://host[:port] with at most a trailing slash:
// the worker appends API paths to it.
func validMasterURL(raw string) string {
	if raw == "" {
		return "is required, e.g. http://10.0.0.1:30000"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Sprintf("%q is not a URL", raw)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q must start with http:// or https://", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Sprintf("%q has no host", raw)
	case u.User != nil, u.RawQuery != "", u.Fragment != "", u.Path != "" && u.Path != "/":
		return fmt.Sprintf("%q must be just http(s)://host[:port]", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: port must be from 1 to 65535", raw)
		}
	}
	return ""
}

func validTokenName(name string) string {
	n := utf8.RuneCountInString(name)
	switch {
	case strings.TrimSpace(name) == "":
		return "is required"
	case n > maxTokenNameLen:
		return fmt.Sprintf("is longer than %d characters", maxTokenNameLen)
	case strings.ContainsFunc(name, unicode.IsControl):
		return "may not hold control characters"
	}
	return ""
}

// parseTrustedProxies reads a comma-separated list of IPs and CIDRs.
func parseTrustedProxies(raw string) ([]string, string) {
	var out []string
	for _, p := range strings.Split(raw, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.Contains(p, "/") {
			if _, _, err := net.ParseCIDR(p); err != nil {
				return nil, fmt.Sprintf("%q is not a CIDR like 10.0.0.0/8", p)
			}
		} else if net.ParseIP(p) == nil {
			return nil, fmt.Sprintf("%q is not an IP address or CIDR", p)
		}
		out = append(out, p)
	}
	return out, ""
}

// parseAllowTypes reads --allow-types: gated task types, comma-separated,
// each once.
func parseAllowTypes(raw string) ([]string, string) {
	var out []string
	for _, t := range strings.Split(raw, ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		switch {
		case t == "":
			continue
		case t == protocol.TaskShell:
			return nil, "shell has its own flag: --allow-shell"
		case t == protocol.TaskHTTP:
			return nil, "http tasks always run: leave http out"
		case !protocol.IsGatedType(t):
			return nil, fmt.Sprintf("%q is not one of %s", t, strings.Join(protocol.GatedTypes(), ", "))
		case slices.Contains(out, t):
			return nil, fmt.Sprintf("%q is listed twice", t)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out, ""
}
