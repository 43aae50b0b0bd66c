package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Arrivals are given to the second they were scheduled for: on time, a
// little early, over 800 ms late (moved back to its free second), missing,
// and doubled.
func TestAttributeArrivals(t *testing.T) {
	t.Parallel()
	from := time.Unix(1_800_000_000, 0)
	at := func(sec int, ms int) time.Time {
		return from.Add(time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond)
	}
	times := []time.Time{
		at(0, 10),   // second 0: 10 ms
		at(1, -50),  // second 1: 50 ms early
		at(3, 100),  // second 2: 1.1 s late, moved back (second 3's own comes next)
		at(3, 120),  // second 3: 120 ms
		at(5, 30),   // second 4: missing; second 5: 30 ms
		at(6, 500),  // second 6: 500 ms
		at(6, 600),  // second 6 again: a double (second 5 has its own)
		at(10, 0),   // outside the window
		at(-1, 900), // before it
	}
	lags, missed, doubled := attribute(times, from, 7)
	want := []time.Duration{10 * time.Millisecond, -50 * time.Millisecond, 1100 * time.Millisecond, 120 * time.Millisecond,
		30 * time.Millisecond, 500 * time.Millisecond}
	if len(lags) != len(want) {
		t.Fatalf("lags %v, want %v", lags, want)
	}
	for i := range want {
		if lags[i] != want[i] {
			t.Errorf("lag %d = %s, want %s", i, lags[i], want[i])
		}
	}
	if missed != 1 || doubled != 1 {
		t.Errorf("missed %d doubled %d, want 1 and 1", missed, doubled)
	}
}

// A Dkron that dies while starting (as it did at 500 tasks: too many open
// files) is reported as crashed with the reason its log gives, at once.
func TestPeerReportsACrashedDkron(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := filepath.Join(dir, "dkron")
	script := "#!/bin/sh\necho 'time=\"x\" level=fatal msg=\"listen tcp 127.0.0.1:1: accept4: too many open files\"' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &bench{opt: options{Runs: 1, Progress: tlog{t}}, tmp: dir}
	target, err := startPeerTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := b.measurePeer(ctx, target, &dkron{bin: fake}, "r1", 5, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.failed, "too many open files") {
		t.Fatalf("failed = %q, want the log's reason", r.failed)
	}
	rows := peerRows(5, 2*time.Second, summarise(nil), summarise([]peerRound{r}))
	var printed []string
	for _, row := range rows {
		printed = append(printed, row.Scenario+" | "+row.Figure)
	}
	out := strings.Join(printed, "\n")
	if !strings.Contains(out, "Dkron failed 1 of 1 times") || !strings.Contains(out, "too many open files") {
		t.Errorf("rows do not report the crash:\n%s", out)
	}
}
