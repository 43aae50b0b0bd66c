package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestMain lets the test binary play smbench's child roles (the lag peer).
func TestMain(m *testing.M) {
	if runRole() {
		return
	}
	os.Exit(m.Run())
}

// tlog writes progress lines through t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestShortModeRunsEveryScenario runs smbench -short end to end, one
// subtest per scenario, side by side (lag alone, last): every scenario must complete and print
// its rows. Speed is not judged here (benchmarks are never timed
// assertions); -short turns every verdict into INFO. MySQL rows run when
// SM_TEST_MYSQL_DSN is set, PostgreSQL rows when SM_TEST_PG_DSN is, Galera
// rows on the cluster of SM_TEST_GALERA_DSNS or, when the galera-4 provider
// is installed, on a three-node cluster the test starts (all three
// required with SM_TEST_REQUIRE_ALL=1).
func TestShortModeRunsEveryScenario(t *testing.T) {
	// One binary for every scenario (each run would otherwise build its own).
	bin := filepath.Join(t.TempDir(), "schedulemaster")
	// Built as the release image builds it (CGO_ENABLED=0, -trimpath), so
	// CI compiles the dependency graph once for vet, this and the image.
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../schedulemaster")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build schedulemaster: %v\n%s", err, out)
	}
	galera, galeraMissing := galeraForTest(t)
	check := func(t *testing.T, name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		var out bytes.Buffer
		o := options{Short: true, Only: name, Bin: bin, MySQL: os.Getenv(storetest.EnvMySQLDSN),
			Postgres: os.Getenv(storetest.EnvPostgresDSN), Galera: galera, Progress: tlog{t}}
		rows, err := run(ctx, o, &out)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Fatalf("scenario %s printed no row", name)
		}
		for _, r := range rows {
			if !strings.Contains(out.String(), r.Scenario) || !strings.Contains(out.String(), r.Figure) {
				t.Errorf("row %q is not in the printed table", r.Scenario)
			}
			switch r.Verdict {
			case Info:
			case Skip:
				if strings.Contains(r.Scenario, "Galera") && storetest.RequireAll() {
					t.Errorf("%s: skipped although %s=1: %s (%s)", r.Scenario, storetest.EnvRequireAll, r.Figure, galeraMissing)
				} else if (strings.Contains(r.Scenario, "MySQL") || strings.Contains(r.Scenario, "MariaDB") || strings.Contains(r.Scenario, "PostgreSQL")) && storetest.RequireAll() {
					t.Errorf("%s: skipped although %s=1: %s", r.Scenario, storetest.EnvRequireAll, r.Figure)
				}
			default:
				t.Errorf("%s: verdict %s in -short mode: %s", r.Scenario, r.Verdict, r.Figure)
			}
		}
		if !strings.Contains(out.String(), "verdict") {
			t.Error("no table header printed")
		}
	}
	// The lag scenario measures fires against the clock: it runs alone,
	// after the others, which run side by side.
	t.Run("side by side", func(t *testing.T) {
		for _, s := range scenarios() {
			if s.name == "lag" {
				continue
			}
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				check(t, s.name)
			})
		}
	})
	t.Run("lag", func(t *testing.T) { check(t, "lag") })
}

// galeraForTest returns the Galera nodes smbench's Galera rows run on: those
// of SM_TEST_GALERA_DSNS, else a three-node cluster started for the test
// (stopped when it ends) if this machine can run one. Without either it
// returns no DSNs and why, and the Galera rows skip.
func galeraForTest(t *testing.T) (dsns []string, missing string) {
	t.Helper()
	if raw := os.Getenv(envGaleraDSNs); raw != "" {
		dsns, err := parseGaleraDSNs(raw)
		if err != nil {
			t.Fatalf("%s: %v", envGaleraDSNs, err)
		}
		return dsns, ""
	}
	if why := storetest.GaleraMissing(); why != "" {
		t.Logf("the Galera rows skip: %s", why)
		return nil, why
	}
	g := storetest.StartGalera(t)
	for i := range g.Nodes {
		dsns = append(dsns, g.DSN(i, ""))
	}
	return dsns, ""
}
