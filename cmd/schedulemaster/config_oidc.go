package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
)

// secret is a value never printed: fmt and slog show "***" (or "" when unset).
type secret string

// String masks the secret.
func (s secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// GoString masks the secret in %#v too.
func (s secret) GoString() string { return `"` + s.String() + `"` }

// LogValue masks the secret in structured logs.
func (s secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// oidcConfig is OIDC sign-on of the master; Issuer "" means none.
type oidcConfig struct {
	Issuer, ClientID     string
	ClientSecretText     string // as parsed; Secret keeps it masked from here on
	ClientSecret         secret
	RedirectURL          string // "" means from --advertise or the listen address
	Name                 string
	ScopesText           string
	UsernameClaim        string
	GroupsClaim          string
	AdminGroup           string
	ViewerGroupsText     string
	Scopes, ViewerGroups []string
	ProjectGroupsText    string
	ProjectGroups        []master.GroupProject
}

// String shows the OIDC configuration without the client secret.
func (c oidcConfig) String() string {
	if c.Issuer == "" {
		return "oidc: off"
	}
	return fmt.Sprintf("oidc: issuer %s, client %s, secret %s, redirect %s, scopes %v, admin group %q, viewer groups %v",
		c.Issuer, c.ClientID, c.ClientSecret, c.RedirectURL, c.Scopes, c.AdminGroup, c.ViewerGroups)
}

// addOIDCOptions adds the --oidc-* options (env SM_OIDC_*, file keys OIDC*).
func addOIDCOptions(o *options, c *oidcConfig) {
	o.add(&option{name: "oidc-issuer", key: "OIDCIssuer", dst: &c.Issuer, usage: "OpenID Connect issuer URL; enables \"Sign in with\" (default: none)"})
	o.add(&option{name: "oidc-client-id", key: "OIDCClientID", dst: &c.ClientID, usage: "OIDC client id"})
	o.add(&option{name: "oidc-client-secret", key: "OIDCClientSecret", dst: &c.ClientSecretText, usage: "OIDC client secret (never printed)"})
	o.add(&option{name: "oidc-redirect-url", key: "OIDCRedirectURL", dst: &c.RedirectURL,
		usage: "URL the provider sends browsers back to, ending in " + handlers.PathOIDCCallback + " (default: from --advertise or --listen)"})
	o.add(&option{name: "oidc-name", key: "OIDCName", def: "single sign-on", dst: &c.Name, usage: "provider name on the login page's \"Sign in with\" button"})
	o.add(&option{name: "oidc-scopes", key: "OIDCScopes", def: "openid,profile,email", dst: &c.ScopesText, usage: "comma-separated scopes asked for (openid is always asked)"})
	o.add(&option{name: "oidc-username-claim", key: "OIDCUsernameClaim", def: "preferred_username", dst: &c.UsernameClaim, usage: "ID token claim that names the user here"})
	o.add(&option{name: "oidc-groups-claim", key: "OIDCGroupsClaim", def: "groups", dst: &c.GroupsClaim, usage: "ID token claim that lists the user's groups"})
	o.add(&option{name: "oidc-admin-group", key: "OIDCAdminGroup", dst: &c.AdminGroup, usage: "group whose members are admin"})
	o.add(&option{name: "oidc-viewer-groups", key: "OIDCViewerGroups", dst: &c.ViewerGroupsText, usage: "comma-separated groups whose members are viewer (others are refused)"})
	o.add(&option{name: "oidc-project-groups", key: "OIDCProjectGroups", dst: &c.ProjectGroupsText, usage: "groups mapped to project roles: GROUP=>PROJECT:ROLE, separated by ; (sets memberships at every sign-in)"})
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// validate checks the OIDC options together and fills the parsed fields.
func (c *oidcConfig) validate(o *options) []string {
	var problems []string
	bad := func(name, format string, a ...any) {
		problems = append(problems, o.where(name)+": "+fmt.Sprintf(format, a...))
	}
	c.ClientSecret, c.ClientSecretText = secret(c.ClientSecretText), ""
	if c.Issuer == "" {
		for _, n := range []string{"oidc-client-id", "oidc-client-secret", "oidc-redirect-url", "oidc-admin-group", "oidc-viewer-groups", "oidc-project-groups"} {
			if o.explicit(n) {
				bad(n, "is set but --oidc-issuer is not: give the issuer too, or remove the OIDC options")
			}
		}
		return problems
	}
	if msg := checkHTTPURL(c.Issuer); msg != "" {
		bad("oidc-issuer", "%s", msg)
	}
	if c.ClientID == "" {
		bad("oidc-client-id", "is required with --oidc-issuer")
	}
	if c.ClientSecret == "" {
		bad("oidc-client-secret", "is required with --oidc-issuer")
	}
	if c.RedirectURL != "" {
		if msg := checkHTTPURL(c.RedirectURL); msg != "" {
			bad("oidc-redirect-url", "%s", msg)
		} else if u, _ := url.Parse(c.RedirectURL); u.Path != handlers.PathOIDCCallback {
			bad("oidc-redirect-url", "must end in %s, the path this master answers the provider on", handlers.PathOIDCCallback)
		}
	}
	if c.Name == "" || len(c.Name) > 64 || !utf8.ValidString(c.Name) {
		bad("oidc-name", "must be 1 to 64 characters of text")
	}
	c.Scopes = splitList(c.ScopesText)
	if !containsString(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	if c.UsernameClaim == "" {
		bad("oidc-username-claim", "is empty")
	}
	if c.GroupsClaim == "" {
		bad("oidc-groups-claim", "is empty")
	}
	c.ViewerGroups = splitList(c.ViewerGroupsText)
	pg, err := master.ParseGroupProjects(c.ProjectGroupsText)
	if err != nil {
		bad("oidc-project-groups", "%v", err)
	}
	c.ProjectGroups = pg
	if c.AdminGroup == "" && len(c.ViewerGroups) == 0 && len(c.ProjectGroups) == 0 {
		problems = append(problems, "--oidc-admin-group, --oidc-viewer-groups or --oidc-project-groups is required with --oidc-issuer: without them nobody could sign in")
	}
	return problems
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkHTTPURL returns what is wrong with an absolute http(s) URL, or "".
func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Sprintf("%q is not an http(s) URL like https://idp.example.com/realms/main", s)
	}
	return ""
}

// handlerOIDC is what the routes need, nil without OIDC; redirect is the
// default callback URL when none was configured.
func (c oidcConfig) handlerOIDC(defaultBase string) *handlers.OIDCConfig {
	if c.Issuer == "" {
		return nil
	}
	redirect := c.RedirectURL
	if redirect == "" {
		redirect = strings.TrimSuffix(defaultBase, "/") + handlers.PathOIDCCallback
	}
	return &handlers.OIDCConfig{Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: string(c.ClientSecret),
		RedirectURL: redirect, DisplayName: c.Name, Scopes: c.Scopes,
		UsernameClaim: c.UsernameClaim, GroupsClaim: c.GroupsClaim}
}

// roles is the engine's group mapping of OIDC sign-in, nil without OIDC.
func (c oidcConfig) roles() *master.GroupRoles {
	if c.Issuer == "" {
		return nil
	}
	r := master.GroupRoles{Viewer: c.ViewerGroups, Projects: c.ProjectGroups}
	if c.AdminGroup != "" {
		r.Admin = []string{c.AdminGroup}
	}
	return &r
}
