package main

import (
	"strings"
	"testing"
	"time"
)

func TestLDAPConfig(t *testing.T) {
	t.Parallel()
	const secret = "very-secret-bind-pw"
	// Off by default.
	if c, _, err := parseMasterConfig(nil, envMap(nil)); err != nil || c.LDAP != nil {
		t.Fatalf("default: LDAP = %v, %v; want off", c.LDAP, err)
	}
	// Env and file together, validated as a whole; group lists split on ";".
	file := writeFile(t, `{"Master": {"LDAPUserBase": "ou=people,dc=example,dc=com", "LDAPTimeout": "3s",
		"LDAPAdminGroups": "cn=ops,ou=groups,dc=example,dc=com; cn=sre,ou=groups,dc=example,dc=com"}}`)
	c, _, err := parseMasterConfig([]string{"--config", file}, envMap(map[string]string{
		"SM_LDAP_URL": "ldaps://ldap.example.com", "SM_LDAP_BIND_DN": "cn=svc,dc=example,dc=com", "SM_LDAP_BIND_PASSWORD": secret,
	}))
	if err != nil || c.LDAP == nil {
		t.Fatalf("LDAP config: %v", err)
	}
	if got := c.LDAP; got.URL != "ldaps://ldap.example.com" || got.Timeout != 3*time.Second || got.ConnectTimeout != 5*time.Second ||
		len(got.AdminGroups) != 2 || got.AdminGroups[1] != "cn=sre,ou=groups,dc=example,dc=com" || got.UserFilter != "(uid=%s)" || got.BindPassword != secret {
		t.Fatalf("LDAP config = %+v", got)
	}
	if strings.Contains(c.LDAP.String(), secret) {
		t.Fatalf("String shows the bind password: %s", c.LDAP)
	}
	// Every problem at once, never the password.
	_, _, err = parseMasterConfig([]string{"--ldap-url", "http://x", "--ldap-starttls", "--ldap-bind-password", secret,
		"--ldap-user-filter", "(uid=%s)(cn=%s)", "--ldap-admin-groups", "not a dn"}, envMap(nil))
	if err == nil {
		t.Fatal("a bad LDAP config was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"--ldap-url", "--ldap-bind-dn", "--ldap-user-base: is required", "--ldap-user-filter", "--ldap-admin-groups"} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems %q lack %q", msg, want)
		}
	}
	if strings.Contains(msg, secret) {
		t.Fatalf("problems show the bind password: %s", msg)
	}
	// The README's Active Directory nested-group filter is accepted.
	if _, _, err := parseMasterConfig([]string{"--ldap-url", "ldaps://dc1", "--ldap-user-base", "OU=Staff,DC=corp,DC=example,DC=com",
		"--ldap-user-filter", "(&(objectClass=user)(sAMAccountName=%s))", "--ldap-group-base", "OU=Groups,DC=corp,DC=example,DC=com",
		"--ldap-group-filter", "(member:1.2.840.113556.1.4.1941:=%s)", "--ldap-viewer-groups", "CN=SM Viewers,OU=Groups,DC=corp,DC=example,DC=com"}, envMap(nil)); err != nil {
		t.Fatalf("the README's AD set-up: %v", err)
	}
	// An LDAP option without --ldap-url is a mistake, not silence.
	if _, _, err := parseMasterConfig([]string{"--ldap-user-base", "dc=x"}, envMap(nil)); err == nil || !strings.Contains(err.Error(), "--ldap-url is not") {
		t.Fatalf("--ldap-user-base alone: %v", err)
	}
}
