package protocol

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Connection kinds: the systems a named connection reaches.
const (
	ConnNATS     = "nats"
	ConnAMQP     = "amqp"
	ConnMQTT     = "mqtt"
	ConnRedis    = "redis"
	ConnKafka    = "kafka"
	ConnPostgres = "postgres"
	ConnMySQL    = "mysql"
	ConnGRPC     = "grpc"
)

// ConnectionKinds lists the connection kinds, in the order forms offer them.
func ConnectionKinds() []string {
	return []string{ConnNATS, ConnAMQP, ConnMQTT, ConnRedis, ConnKafka, ConnPostgres, ConnMySQL, ConnGRPC}
}

// Limits on connections.
const (
	MaxConnectionSecret = 4096
	maxConnAddresses    = 16
	maxConnAddress      = 1000 // the stored column's width
	maxConnField        = 200
	maxConnCA           = 64 << 10
)

// connNameRE is a connection's name: what tasks refer to it by.
var connNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// connOptions lists, per kind, the options a connection of that kind may
// set, with the values each takes (nil: any short text).
var connOptions = map[string]map[string][]string{
	ConnMQTT:  {"protocol_version": {"3.1.1", "5"}},
	ConnKafka: {"sasl": {"plain", "scram-sha-256", "scram-sha-512"}},
}

// ConnectionTLS is how a connection uses TLS.
type ConnectionTLS struct {
	// Enabled turns TLS on; the other fields only matter then.
	Enabled bool `json:"enabled"`
	// CA is a PEM bundle of the authorities the server's certificate must
	// chain to; empty: the worker's system roots.
	CA string `json:"ca,omitempty"`
	// ServerName is the name the server's certificate must hold, when it
	// is not the address's host.
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any certificate (for tests only: it
	// leaves the link open to anyone on the path).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// ConnectionSpec is a named connection: what tasks of the types beyond HTTP
// and shell reach, defined once per project (or for every project by a
// cluster admin) and referred to by name. The master stores its secret
// encrypted and sends it, whole, only to the workers that run a task using
// it, with that task.
type ConnectionSpec struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Address is host:port; several, comma-separated, for nats and kafka
	// (the servers or brokers to try).
	Address string `json:"address"`
	// Database is the database of a postgres or mysql connection, the
	// database number of a redis one, and the virtual host of an amqp one.
	Database string `json:"database,omitempty"`
	User     string `json:"user,omitempty"`
	// Secret is the password or token; masked everywhere it is shown.
	Secret  string            `json:"secret,omitempty"`
	TLS     *ConnectionTLS    `json:"tls,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	// Version changes at every save, so a worker knows its pooled client
	// of the connection is stale.
	Version int64 `json:"version,omitempty"`
}

// Normalize trims the connection's text fields and lowers its kind.
func (c *ConnectionSpec) Normalize() {
	c.Name = strings.TrimSpace(c.Name)
	c.Kind = strings.ToLower(strings.TrimSpace(c.Kind))
	parts := strings.Split(c.Address, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	c.Address = strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), ",")
	c.Database = strings.TrimSpace(c.Database)
	c.User = strings.TrimSpace(c.User)
	if c.TLS != nil {
		c.TLS.ServerName = strings.TrimSpace(c.TLS.ServerName)
		c.TLS.CA = strings.TrimSpace(c.TLS.CA)
		if !c.TLS.Enabled && c.TLS.CA == "" && c.TLS.ServerName == "" && !c.TLS.InsecureSkipVerify {
			c.TLS = nil
		}
	}
	for k, v := range c.Options {
		if nk := strings.ToLower(strings.TrimSpace(k)); nk != k {
			delete(c.Options, k)
			c.Options[nk] = strings.TrimSpace(v)
		} else {
			c.Options[k] = strings.TrimSpace(v)
		}
	}
}

// Validate checks every field of the connection and returns FieldErrors,
// or nil.
func (c *ConnectionSpec) Validate() error {
	fe := FieldErrors{}
	const bad = "holds a NUL byte or invalid UTF-8"
	switch {
	case c.Name == "":
		fe["name"] = "is required"
	case badText(c.Name) || !connNameRE.MatchString(c.Name):
		fe["name"] = "must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	if !slices.Contains(ConnectionKinds(), c.Kind) {
		fe["kind"] = fmt.Sprintf("%q is not one of %s", c.Kind, strings.Join(ConnectionKinds(), ", "))
	}
	if msg := checkAddresses(c.Kind, c.Address); msg != "" {
		fe["address"] = msg
	}
	for field, v := range map[string]string{"database": c.Database, "user": c.User} {
		switch {
		case badText(v) || strings.ContainsAny(v, controlChars):
			fe[field] = bad
		case len(v) > maxConnField:
			fe[field] = fmt.Sprintf("is longer than %d bytes", maxConnField)
		}
	}
	switch c.Kind {
	case ConnRedis:
		if c.Database != "" {
			if n, err := strconv.Atoi(c.Database); err != nil || n < 0 || n > 255 {
				fe["database"] = "must be a database number from 0 to 255 for redis"
			}
		}
	case ConnPostgres, ConnMySQL:
		if c.Database == "" {
			fe["database"] = "is required for " + c.Kind
		}
	}
	switch {
	case badText(c.Secret) || strings.ContainsRune(c.Secret, 0):
		fe["secret"] = bad
	case len(c.Secret) > MaxConnectionSecret:
		fe["secret"] = fmt.Sprintf("is longer than %d bytes", MaxConnectionSecret)
	}
	if t := c.TLS; t != nil {
		switch {
		case badText(t.CA) || badText(t.ServerName):
			fe["tls"] = bad
		case len(t.CA) > maxConnCA:
			fe["tls.ca"] = fmt.Sprintf("is longer than %d bytes", maxConnCA)
		case t.CA != "" && !strings.Contains(t.CA, "-----BEGIN CERTIFICATE-----"):
			fe["tls.ca"] = "must be PEM certificates (-----BEGIN CERTIFICATE-----)"
		case len(t.ServerName) > 253:
			fe["tls.server_name"] = "is longer than 253 bytes"
		}
	}
	allowed := connOptions[c.Kind]
	for _, k := range slices.Sorted(maps.Keys(c.Options)) {
		vals, ok := allowed[k]
		switch {
		case !ok:
			fe["options"] = fmt.Sprintf("%q is not an option of a %s connection%s", k, c.Kind, optionHint(allowed))
		case vals != nil && !slices.Contains(vals, c.Options[k]):
			fe["options"] = fmt.Sprintf("%s %q is not one of %s", k, c.Options[k], strings.Join(vals, ", "))
		}
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

func optionHint(allowed map[string][]string) string {
	if len(allowed) == 0 {
		return " (it has none)"
	}
	return " (it has " + strings.Join(slices.Sorted(maps.Keys(allowed)), ", ") + ")"
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkAddresses returns what is wrong with a connection's address, or "".
func checkAddresses(kind, addr string) string {
	if addr == "" {
		return "is required: host:port"
	}
	if len(addr) > maxConnAddress {
		return fmt.Sprintf("is longer than %d bytes", maxConnAddress)
	}
	if badText(addr) || strings.ContainsAny(addr, controlChars+" /@") {
		return "must be host:port (no scheme, user or path), comma-separated for several"
	}
	parts := strings.Split(addr, ",")
	if len(parts) > 1 && kind != ConnNATS && kind != ConnKafka {
		return "must be one host:port for " + kind
	}
	if len(parts) > maxConnAddresses {
		return fmt.Sprintf("at most %d addresses", maxConnAddresses)
	}
	for _, p := range parts {
		host, port, err := net.SplitHostPort(p)
		if err != nil || host == "" {
			return fmt.Sprintf("%q is not host:port", p)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: the port must be from 1 to 65535", p)
		}
	}
	return ""
}

// Addresses returns the connection's addresses, one per host:port.
func (c *ConnectionSpec) Addresses() []string {
	if c.Address == "" {
		return nil
	}
	return strings.Split(c.Address, ",")
}

// ConnectionTestRequest is the body of PathConnectionTest: the master asks
// a worker to reach a connection (workers reach the systems, not the master).
type ConnectionTestRequest struct {
	Connection ConnectionSpec `json:"connection"`
}

// ConnectionTestResponse is the worker's answer to PathConnectionTest.
type ConnectionTestResponse struct {
	OK bool `json:"ok"`
	// Message says what the system answered (its version, a server name) or
	// why it could not be reached; never the secret.
	Message    string `json:"message"`
	DurationMS int64  `json:"duration_ms"`
}

// PathConnectionTest is the worker's guarded route that tries a connection.
const PathConnectionTest = "/api/connection/test"

// connKindsOf lists the connection kinds a task type can use.
func connKindsOf(typ string) []string {
	switch typ {
	case TaskNATS:
		return []string{ConnNATS}
	case TaskAMQP:
		return []string{ConnAMQP}
	case TaskMQTT:
		return []string{ConnMQTT}
	case TaskRedis:
		return []string{ConnRedis}
	case TaskKafka:
		return []string{ConnKafka}
	case TaskSQL:
		return []string{ConnPostgres, ConnMySQL}
	case TaskGRPC:
		return []string{ConnGRPC}
	}
	return nil
}

// ConnectionKindsOf lists the connection kinds a task of type typ can use
// (none for HTTP and shell).
func ConnectionKindsOf(typ string) []string { return connKindsOf(typ) }

// checkConnName returns what is wrong with a task's connection reference.
func checkConnName(name string) string {
	switch {
	case name == "":
		return "is required: the name of a connection"
	case !utf8.ValidString(name) || !connNameRE.MatchString(name):
		return "must be a connection's name: letters, digits, '.', '_' or '-'"
	}
	return ""
}
