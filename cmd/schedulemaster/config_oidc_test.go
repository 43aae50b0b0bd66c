package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

const oidcTestSecret = "oidc-very-secret-value-42"

func TestOIDCConfigSources(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{"Master": {"OIDCIssuer": "https://file.example.com", "OIDCClientID": "sm-file",
		"OIDCClientSecret": "`+oidcTestSecret+`", "OIDCAdminGroup": "sm-admins", "OIDCViewerGroups": "ops, sm-viewers"}}`)
	c, _, err := parseMasterConfig([]string{"--config", file, "--oidc-client-id", "sm-flag"},
		envMap(map[string]string{"SM_OIDC_ISSUER": "https://keycloak.example.com/realms/main", "SM_OIDC_NAME": "Keycloak"}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.OIDC
	got := []any{o.Issuer, o.ClientID, string(o.ClientSecret), o.Name, o.Scopes, o.UsernameClaim, o.GroupsClaim, o.AdminGroup, o.ViewerGroups}
	want := []any{"https://keycloak.example.com/realms/main", "sm-flag", oidcTestSecret, "Keycloak",
		[]string{"openid", "profile", "email"}, "preferred_username", "groups", "sm-admins", []string{"ops", "sm-viewers"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	h := o.handlerOIDC("http://10.0.0.5:30000")
	if h.RedirectURL != "http://10.0.0.5:30000/login/oidc/callback" || h.ClientSecret != oidcTestSecret ||
		!reflect.DeepEqual(o.roles().Admin, []string{"sm-admins"}) {
		t.Fatalf("handler config: %+v", h)
	}

	// The secret is never printed: not by fmt in any verb, slog, or the usage.
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%v %+v %#v %s %v", c, c, c, o, o.ClientSecret)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "oidc", o, "secret", o.ClientSecret)
	o2 := masterOptions(&masterConfig{})
	o2.usage(&buf, masterSynopsis)
	if strings.Contains(buf.String(), oidcTestSecret) {
		t.Fatalf("the client secret was printed:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "secret ***") || !strings.Contains(buf.String(), "SM_OIDC_CLIENT_SECRET") {
		t.Fatalf("no masked secret or env name in:\n%s", buf.String())
	}
}

func TestOIDCConfigOff(t *testing.T) {
	t.Parallel()
	c, _, err := parseMasterConfig(nil, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.OIDC.handlerOIDC("http://x") != nil {
		t.Fatal("OIDC on without an issuer")
	}
}

func TestOIDCConfigBadValues(t *testing.T) {
	t.Parallel()
	base := []string{"--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "sm", "--oidc-client-secret", oidcTestSecret, "--oidc-viewer-groups", "ops"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"secret without issuer", []string{"--oidc-client-secret", oidcTestSecret}, []string{"--oidc-client-secret: is set but --oidc-issuer is not"}},
		{"no client", []string{"--oidc-issuer", "https://idp.example.com", "--oidc-admin-group", "a"},
			[]string{"--oidc-client-id: is required", "--oidc-client-secret: is required"}},
		{"no groups", []string{"--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "sm", "--oidc-client-secret", "s"},
			[]string{"--oidc-admin-group, --oidc-viewer-groups or --oidc-project-groups is required"}},
		{"bad issuer", append(append([]string{}, base...), "--oidc-issuer", "ftp://idp"), []string{"--oidc-issuer: \"ftp://idp\" is not an http(s) URL"}},
		{"redirect elsewhere", append(append([]string{}, base...), "--oidc-redirect-url", "https://sm.example.com/cb"),
			[]string{"--oidc-redirect-url: must end in /login/oidc/callback"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseMasterConfig(tc.args, envMap(nil))
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a configError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("problems %q lack %q", err.Error(), w)
				}
			}
			if strings.Contains(err.Error(), oidcTestSecret) {
				t.Errorf("the secret is in the problems: %s", err)
			}
		})
	}
}
