package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
)

func TestRunCommands(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		args       []string
		code       int
		wantOut    string
		wantErrOut string
	}{
		{"no args", nil, exitUsage, "", "commands:"},
		{"help", []string{"help"}, exitOK, "token create", ""},
		{"help master", []string{"help", "master"}, exitOK, "-health-interval", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"unknown", []string{"serve"}, exitUsage, "", `unknown command "serve"`},
		{"version", []string{"version"}, exitOK, "schedulemaster ", ""},
		{"worker -h", []string{"worker", "-h"}, exitOK, "SMCORE_AUTOR", ""},
		{"worker bad config", []string{"worker", "--port", "x"}, exitUsage, "",
			`schedulemaster worker: flag --port: "x" is not a whole number`},
		{"worker -h labels", []string{"worker", "-h"}, exitOK, "--labels string", ""},
		{"worker -h drain", []string{"worker", "-h"}, exitOK, "env SM_DRAIN_TIMEOUT; file key DrainTimeout", ""},
		{"worker bad label", []string{"worker", "--labels", "pool=billing,zone=eu 1"}, exitUsage, "",
			`flag --labels: label "zone=eu 1": value must be`},
		{"master unknown flag", []string{"master", "--nope"}, exitUsage, "", "flag provided but not defined: -nope"},
		{"token without create", []string{"token"}, exitUsage, "", "token create --name NAME"},
		{"token bad name", []string{"token", "create"}, exitUsage, "", "--name: is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(tc.args, &out, &errOut, envMap(nil))
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tc.wantOut, out.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErrOut) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErrOut, errOut.String())
			}
		})
	}
}

func TestAdvertiseFor(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"0.0.0.0:30000":  "127.0.0.1:30000",
		"[::]:30000":     "127.0.0.1:30000",
		"10.1.2.3:30000": "10.1.2.3:30000",
		"[::1]:30000":    "[::1]:30000",
	}
	for in, want := range cases {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := advertiseFor(addr); got != want {
			t.Errorf("advertiseFor(%s) = %s, want %s", in, got, want)
		}
	}
}

// openTestStore opens a migrated SQLite store in a temp dir.
func openTestStore(t *testing.T) (*store.Store, store.DSN) {
	t.Helper()
	dsn, err := store.ParseDSN("", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dsn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dsn
}

func TestTokenCreate(t *testing.T) {
	t.Parallel()
	st, dsn := openTestStore(t)
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A token acts as a user: an unknown or disabled one gets none.
	if err := runTokenCreate(context.Background(), tokenConfig{Name: "ci", User: "admin", DSN: dsn}, &out, log); err == nil ||
		!strings.Contains(err.Error(), "there is no user admin") {
		t.Fatalf("err = %v, want no user", err)
	}
	if err := store.CreateUser(context.Background(), st.DB, &store.User{Username: "off", PasswordHash: "x", Role: store.RoleAdmin, Disabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := runTokenCreate(context.Background(), tokenConfig{Name: "ci", User: "off", DSN: dsn}, &out, log); err == nil ||
		!strings.Contains(err.Error(), "is disabled") {
		t.Fatalf("err = %v, want disabled", err)
	}
	if err := store.CreateUser(context.Background(), st.DB, &store.User{Username: "admin", PasswordHash: "x", Role: store.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := runTokenCreate(context.Background(), tokenConfig{Name: "ci", User: "admin", DSN: dsn}, &out, log); err != nil {
		t.Fatal(err)
	}
	plain := strings.TrimSuffix(out.String(), "\n")
	if !strings.HasPrefix(plain, store.TokenPrefix) || strings.Contains(plain, "\n") {
		t.Fatalf("stdout = %q, want one token line", out.String())
	}
	tok, err := store.TokenByHash(context.Background(), st.DB, store.HashToken(plain))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "ci" || tok.CreatedBy != "admin" {
		t.Errorf("token %+v", tok)
	}
	// The engine made it: the event log says who.
	evs, _, err := store.ListEvents(context.Background(), st.DB, store.EventFilter{Action: "token.create"})
	if err != nil || len(evs) != 1 || evs[0].Actor != "cli" {
		t.Errorf("token.create events = %+v, %v; want one by cli", evs, err)
	}
	if err := runTokenCreate(context.Background(), tokenConfig{Name: "bad\x00name", User: "admin", DSN: dsn}, &out, log); err == nil ||
		!strings.Contains(err.Error(), "NUL") {
		t.Errorf("err = %v, want the name rule", err)
	}
	missing := store.DSN{Dialect: store.SQLite, Path: filepath.Join(t.TempDir(), "none.db")}
	if err := runTokenCreate(context.Background(), tokenConfig{Name: "ci", User: "admin", DSN: missing}, &out, log); err == nil ||
		!strings.Contains(err.Error(), "no database at") {
		t.Errorf("err = %v, want no database", err)
	}
}
