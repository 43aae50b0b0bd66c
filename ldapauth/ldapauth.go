// Package ldapauth checks console passwords against an LDAP directory
// (OpenLDAP, Active Directory): it binds with a service account, finds the
// user, binds as the user to check the password and reads the user's groups.
// It implements master.PasswordDirectory; the engine decides what a
// directory's answer means (roles, users created just in time).
package ldapauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-ldap/ldap/v3"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// Config is the LDAP set-up of a master. BindPassword is a secret: String
// and the logs never show it.
type Config struct {
	// URL is ldap://host[:port] or ldaps://host[:port].
	URL string
	// StartTLS upgrades an ldap:// connection to TLS before any bind.
	StartTLS bool
	// CAFile is a PEM file of the CAs that sign the server's certificate
	// (default: the system's); InsecureSkipVerify is for tests only.
	CAFile             string
	InsecureSkipVerify bool
	// BindDN and BindPassword are the service account that searches.
	BindDN, BindPassword string
	// UserBase is where users are searched (subtree); UserFilter has one %s,
	// replaced by the escaped user name (default (uid=%s)).
	UserBase, UserFilter string
	// UsernameAttr names the entry's attribute that becomes the user name
	// (default uid; sAMAccountName on Active Directory); MailAttr the email.
	UsernameAttr, MailAttr string
	// GroupAttr is the user's attribute listing group DNs (default memberOf).
	// With GroupBase set, groups are searched instead: GroupFilter has one
	// %s, replaced by the escaped user DN (default (member=%s)).
	GroupAttr, GroupBase, GroupFilter string
	// AdminGroups and ViewerGroups are group DNs mapped to the roles.
	AdminGroups, ViewerGroups []string
	// ProjectGroups map group DNs to roles in projects.
	ProjectGroups []master.GroupProject
	// ConnectTimeout bounds the connection (default 5s); Timeout each
	// operation (default 10s).
	ConnectTimeout, Timeout time.Duration
}

// String describes the configuration without the bind password.
func (c Config) String() string {
	return fmt.Sprintf("ldap{url=%s starttls=%t bind=%s user-base=%s}", c.URL, c.StartTLS, c.BindDN, c.UserBase)
}

// Validate fills the defaults and returns every problem of c, one sentence
// each, naming the options as the command line does ("ldap-url", ...).
func (c *Config) Validate() []string {
	var problems []string
	bad := func(name, format string, a ...any) {
		problems = append(problems, "--ldap-"+name+": "+fmt.Sprintf(format, a...))
	}
	if c.UserFilter == "" {
		c.UserFilter = "(uid=%s)"
	}
	if c.UsernameAttr == "" {
		c.UsernameAttr = "uid"
	}
	if c.MailAttr == "" {
		c.MailAttr = "mail"
	}
	if c.GroupAttr == "" {
		c.GroupAttr = "memberOf"
	}
	if c.GroupFilter == "" {
		c.GroupFilter = "(member=%s)"
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	u, err := url.Parse(c.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "ldap" && u.Scheme != "ldaps"):
		bad("url", "%q is not ldap://host[:port] or ldaps://host[:port]", c.URL)
	case u.Scheme == "ldaps" && c.StartTLS:
		bad("starttls", "is for ldap:// URLs; an ldaps:// URL is TLS already")
	}
	if c.CAFile != "" {
		if _, err := c.tlsConfig(); err != nil {
			bad("ca-file", "%v", err)
		}
	}
	if (c.BindDN == "") != (c.BindPassword == "") {
		bad("bind-dn", "and --ldap-bind-password go together: give both (or neither, for an anonymous search)")
	}
	for name, dn := range map[string]string{"bind-dn": c.BindDN, "user-base": c.UserBase, "group-base": c.GroupBase} {
		if dn != "" {
			if _, err := ldap.ParseDN(dn); err != nil {
				bad(name, "%q is not a DN (like ou=people,dc=example,dc=com)", dn)
			}
		}
	}
	if c.UserBase == "" {
		bad("user-base", "is required (like ou=people,dc=example,dc=com)")
	}
	for name, f := range map[string]string{"user-filter": c.UserFilter, "group-filter": c.GroupFilter} {
		if strings.Count(f, "%s") != 1 || strings.Count(f, "%") != 1 {
			bad(name, "%q must hold %%s exactly once (and no other %%)", f)
		} else if _, err := ldap.CompileFilter(fmt.Sprintf(f, "x")); err != nil {
			bad(name, "%q is not an LDAP filter: %v", f, err)
		}
	}
	if len(c.AdminGroups)+len(c.ViewerGroups)+len(c.ProjectGroups) == 0 {
		bad("admin-groups", "or --ldap-viewer-groups or --ldap-project-groups is required: without a group mapping nobody could sign in")
	}
	for i, gp := range c.ProjectGroups {
		dn, err := ldap.ParseDN(gp.Group)
		if err != nil {
			bad("project-groups", "%q is not a group DN (like cn=ops,ou=groups,dc=example,dc=com)", gp.Group)
			continue
		}
		c.ProjectGroups[i].Group = dn.String()
	}
	for name, list := range map[string][]string{"admin-groups": c.AdminGroups, "viewer-groups": c.ViewerGroups} {
		for i, g := range list {
			dn, err := ldap.ParseDN(g)
			if err != nil {
				bad(name, "%q is not a group DN (like cn=ops,ou=groups,dc=example,dc=com)", g)
				continue
			}
			list[i] = dn.String()
		}
	}
	return problems
}

// Directory is an LDAP directory that checks passwords (master.PasswordDirectory).
type Directory struct {
	cfg Config
	tls *tls.Config
}

// New returns the directory of a validated configuration.
func New(cfg Config) (*Directory, error) {
	if p := cfg.Validate(); len(p) > 0 {
		return nil, fmt.Errorf("ldapauth: %s", strings.Join(p, "; "))
	}
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	return &Directory{cfg: cfg, tls: tc}, nil
}

func (c *Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // tests only, documented
	if u, err := url.Parse(c.URL); err == nil {
		tc.ServerName = u.Hostname()
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// Method is master.MethodLDAP.
func (d *Directory) Method() string { return master.MethodLDAP }

// Roles is the group mapping.
func (d *Directory) Roles() master.GroupRoles {
	return master.GroupRoles{Admin: d.cfg.AdminGroups, Viewer: d.cfg.ViewerGroups, Projects: d.cfg.ProjectGroups}
}

// unavailable wraps a failure to reach or use the directory.
func unavailable(what string, err error) error {
	return fmt.Errorf("ldapauth: %s: %w: %w", what, master.ErrDirectoryUnavailable, err)
}

// connect dials, upgrades with StartTLS when asked and binds as the service
// account; ctx's end closes the connection.
func (d *Directory) connect(ctx context.Context) (*ldap.Conn, func(), error) {
	dialer := &net.Dialer{Timeout: d.cfg.ConnectTimeout}
	conn, err := ldap.DialURL(d.cfg.URL, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(d.tls))
	if err != nil {
		return nil, nil, unavailable("connect to "+d.cfg.URL, err)
	}
	conn.SetTimeout(d.cfg.Timeout)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	closeAll := func() { stop(); conn.Close() }
	if d.cfg.StartTLS {
		if err := conn.StartTLS(d.tls); err != nil {
			closeAll()
			return nil, nil, unavailable("StartTLS", err)
		}
	}
	if d.cfg.BindDN != "" {
		if err := conn.Bind(d.cfg.BindDN, d.cfg.BindPassword); err != nil {
			closeAll()
			// A refused service account is the set-up's fault, never the user's.
			return nil, nil, unavailable("bind as the service account "+d.cfg.BindDN, err)
		}
	}
	return conn, closeAll, nil
}

// Authenticate finds username, checks password by binding as the user's
// DN, and returns the user's identity with their groups. An unknown or
// ambiguous user and a wrong password are master.ErrDirectoryRefused.
func (d *Directory) Authenticate(ctx context.Context, username, password string) (*master.ExternalIdentity, error) {
	// An empty password would be an unauthenticated bind, which many servers
	// accept for any DN: never a proof of anything.
	if password == "" || username == "" || !utf8.ValidString(username) || strings.ContainsRune(username, 0) {
		return nil, master.ErrDirectoryRefused
	}
	conn, done, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	attrs := []string{d.cfg.UsernameAttr, d.cfg.MailAttr}
	if d.cfg.GroupBase == "" {
		attrs = append(attrs, d.cfg.GroupAttr)
	}
	secs := int(d.cfg.Timeout / time.Second)
	res, err := conn.Search(ldap.NewSearchRequest(d.cfg.UserBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		2, secs, false, fmt.Sprintf(d.cfg.UserFilter, ldap.EscapeFilter(username)), attrs, nil))
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) {
		return nil, unavailable("search the user", err)
	}
	if res == nil || len(res.Entries) != 1 {
		return nil, master.ErrDirectoryRefused // unknown, or a filter that matches several
	}
	entry := res.Entries[0]
	if err := conn.Bind(entry.DN, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return nil, master.ErrDirectoryRefused
		}
		return nil, unavailable("bind as the user", err)
	}
	id := &master.ExternalIdentity{
		Method:   master.MethodLDAP,
		Subject:  entry.DN,
		Username: entry.GetAttributeValue(d.cfg.UsernameAttr),
		Email:    entry.GetAttributeValue(d.cfg.MailAttr),
	}
	if id.Username == "" {
		id.Username = username
	}
	var groups []string
	if d.cfg.GroupBase == "" {
		groups = entry.GetAttributeValues(d.cfg.GroupAttr)
	} else {
		// Search as the service account again: the user may not read groups.
		if d.cfg.BindDN != "" {
			if err := conn.Bind(d.cfg.BindDN, d.cfg.BindPassword); err != nil {
				return nil, unavailable("bind again as the service account", err)
			}
		}
		gr, err := conn.Search(ldap.NewSearchRequest(d.cfg.GroupBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
			0, secs, false, fmt.Sprintf(d.cfg.GroupFilter, ldap.EscapeFilter(entry.DN)), []string{"dn"}, nil))
		if err != nil {
			return nil, unavailable("search the user's groups", err)
		}
		for _, g := range gr.Entries {
			groups = append(groups, g.DN)
		}
	}
	for _, g := range groups {
		if dn, err := ldap.ParseDN(g); err == nil {
			id.Groups = append(id.Groups, dn.String()) // the same spelling as the configured DNs
		}
	}
	return id, nil
}
