package main

import (
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/ldapauth"
	"github.com/schedulemaster-go/schedulemaster/master"
)

// ldapOptions is the text form of the LDAP options; group lists are
// separated by ";" (a DN holds commas).
type ldapOptions struct {
	cfg                       ldapauth.Config
	adminGroups, viewerGroups string
	projectGroups             string
}

// addLDAPOptions registers the --ldap-* options (env SM_LDAP_*, file keys
// LDAP*). LDAP sign-in is on when --ldap-url is set.
func addLDAPOptions(o *options, l *ldapOptions) {
	c := &l.cfg
	o.add(&option{name: "ldap-url", key: "LDAPURL", dst: &c.URL, usage: "LDAP directory for console sign-in: ldap://host[:389] or ldaps://host[:636] (default: none, local users only)"})
	o.add(&option{name: "ldap-starttls", key: "LDAPStartTLS", def: "false", dst: &c.StartTLS, usage: "upgrade an ldap:// connection with StartTLS before any bind"})
	o.add(&option{name: "ldap-ca-file", key: "LDAPCAFile", dst: &c.CAFile, usage: "PEM file of the CAs of the LDAP server's certificate (default: the system's)"})
	o.add(&option{name: "ldap-bind-dn", key: "LDAPBindDN", dst: &c.BindDN, usage: "DN of the service account that searches users"})
	o.add(&option{name: "ldap-bind-password", key: "LDAPBindPassword", dst: &c.BindPassword, usage: "password of the service account (never printed)"})
	o.add(&option{name: "ldap-user-base", key: "LDAPUserBase", dst: &c.UserBase, usage: "base DN of the user search (subtree)"})
	o.add(&option{name: "ldap-user-filter", key: "LDAPUserFilter", def: "(uid=%s)", dst: &c.UserFilter, usage: "user search filter; %s is the escaped user name ((sAMAccountName=%s) on Active Directory)"})
	o.add(&option{name: "ldap-username-attr", key: "LDAPUsernameAttr", def: "uid", dst: &c.UsernameAttr, usage: "attribute that becomes the ScheduleMaster user name"})
	o.add(&option{name: "ldap-mail-attr", key: "LDAPMailAttr", def: "mail", dst: &c.MailAttr, usage: "attribute of the user's email"})
	o.add(&option{name: "ldap-group-attr", key: "LDAPGroupAttr", def: "memberOf", dst: &c.GroupAttr, usage: "user attribute listing group DNs (when --ldap-group-base is empty)"})
	o.add(&option{name: "ldap-group-base", key: "LDAPGroupBase", dst: &c.GroupBase, usage: "base DN of a group search instead of --ldap-group-attr"})
	o.add(&option{name: "ldap-group-filter", key: "LDAPGroupFilter", def: "(member=%s)", dst: &c.GroupFilter, usage: "group search filter; %s is the escaped user DN"})
	o.add(&option{name: "ldap-admin-groups", key: "LDAPAdminGroups", dst: &l.adminGroups, usage: "group DNs whose members are admin, separated by ;"})
	o.add(&option{name: "ldap-viewer-groups", key: "LDAPViewerGroups", dst: &l.viewerGroups, usage: "group DNs whose members are viewer, separated by ;"})
	o.add(&option{name: "ldap-project-groups", key: "LDAPProjectGroups", dst: &l.projectGroups, usage: "group DNs mapped to project roles: GROUP=>PROJECT:ROLE, separated by ; (sets memberships at every sign-in)"})
	o.add(&option{name: "ldap-connect-timeout", key: "LDAPConnectTimeout", def: "5s", dst: &c.ConnectTimeout, min: int64(100 * time.Millisecond), max: int64(time.Minute), usage: "bound of a connection to the LDAP server"})
	o.add(&option{name: "ldap-timeout", key: "LDAPTimeout", def: "10s", dst: &c.Timeout, min: int64(100 * time.Millisecond), max: int64(time.Minute), usage: "bound of each LDAP operation"})
}

// splitGroups splits a ";"-separated list of DNs.
func splitGroups(s string) []string {
	var out []string
	for _, g := range strings.Split(s, ";") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// ldapConfig validates the LDAP options as a whole: nil when LDAP is off
// (every --ldap-* option but the defaults unset), else the configuration or
// the problems, one a line. The bind password is never part of a problem.
func (l *ldapOptions) ldapConfig(o *options) (*ldapauth.Config, []string) {
	c := l.cfg
	c.AdminGroups, c.ViewerGroups = splitGroups(l.adminGroups), splitGroups(l.viewerGroups)
	pg, err := master.ParseGroupProjects(l.projectGroups)
	if err != nil {
		return nil, []string{o.where("ldap-project-groups") + ": " + err.Error()}
	}
	c.ProjectGroups = pg
	if c.URL == "" {
		for _, opt := range o.list {
			if strings.HasPrefix(opt.name, "ldap-") && o.explicit(opt.name) {
				return nil, []string{o.where(opt.name) + ": is set but --ldap-url is not: set --ldap-url to sign in with LDAP"}
			}
		}
		return nil, nil
	}
	if p := c.Validate(); len(p) > 0 {
		return nil, p
	}
	return &c, nil
}
