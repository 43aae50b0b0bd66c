package form

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Connection reads the connection form: the values as typed, the engine's
// input, the version an edit started from and the errors of the fields
// that do not parse (the options' lines). The engine checks the rest.
func Connection(v url.Values) (views.ConnectionFields, master.ConnectionInput, int64, protocol.FieldErrors) {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	on := func(k string) bool { return v.Get(k) != "" && v.Get(k) != "0" }
	f := views.ConnectionFields{
		Project: trim("project"), Name: trim("name"), Kind: trim("kind"), Address: trim("address"),
		Database: trim("database"), User: trim("user"), Secret: v.Get("secret"),
		TLSEnabled: on("tls_enabled"), TLSInsecure: on("tls_insecure"), TLSCA: v.Get("tls_ca"), TLSServerName: trim("tls_server_name"),
		Options: v.Get("options"), Description: v.Get("description"), Version: trim("version"),
	}
	in := master.ConnectionInput{
		ConnectionSpec: protocol.ConnectionSpec{Name: f.Name, Kind: f.Kind, Address: f.Address, Database: f.Database,
			User: f.User, Secret: f.Secret},
		Project: f.Project, Description: f.Description,
	}
	if f.Project == views.AllProjectsValue {
		in.Project, in.AllProjects = "", true
	}
	if f.TLSEnabled || f.TLSInsecure || strings.TrimSpace(f.TLSCA) != "" || f.TLSServerName != "" {
		in.TLS = &protocol.ConnectionTLS{Enabled: f.TLSEnabled, CA: f.TLSCA, ServerName: f.TLSServerName, InsecureSkipVerify: f.TLSInsecure}
	}
	fe := protocol.FieldErrors{}
	var err error
	if in.Options, err = Pairs(f.Options, "="); err != nil {
		fe["options"] = err.Error() + " (one key=value per line)"
	}
	var version int64
	if n, err := strconv.ParseInt(f.Version, 10, 64); err == nil && n > 0 {
		version = n // hidden: a version that does not read is no version
	}
	return f, in, version, fe
}

// ConnectionFieldsOf fills the connection form from a stored connection:
// its secret is the mask when it has one (kept unless changed).
func ConnectionFieldsOf(c *master.Connection) views.ConnectionFields {
	f := views.ConnectionFields{
		Project: c.Project, Name: c.Name, Kind: c.Kind, Address: c.Address, Database: c.Database, User: c.User,
		Options: JoinPairs(c.Options, "="), Description: c.Description, Version: strconv.FormatInt(c.Version, 10),
	}
	if c.AllProjects {
		f.Project = views.AllProjectsValue
	}
	if c.Secret != "" {
		f.Secret = protocol.SecretMask
	}
	if t := c.TLS; t != nil {
		f.TLSEnabled, f.TLSInsecure, f.TLSCA, f.TLSServerName = t.Enabled, t.InsecureSkipVerify, t.CA, t.ServerName
	}
	return f
}
