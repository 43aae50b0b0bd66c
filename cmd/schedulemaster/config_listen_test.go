package main

import (
	"strings"
	"testing"
)

// The port the master is told follows --listen when --port is not given, and
// a --port that differs from the bound one is a warning naming both and the fix.
func TestWorkerListenAndAdvertisedPort(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, args []string, env map[string]string) workerConfig {
		t.Helper()
		c, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), args...), envMap(env))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return c
	}
	if c := parse(t, []string{"--listen", "127.0.0.1:48001"}, nil); c.Port != 48001 || c.Host() != "127.0.0.1:48001" || len(c.Warnings) != 0 {
		t.Errorf("--listen alone: port %d, host %s, warnings %q; want 48001 and none", c.Port, c.Host(), c.Warnings)
	}
	if c := parse(t, nil, map[string]string{"SM_LISTEN": ":48002"}); c.Port != 48002 {
		t.Errorf("SM_LISTEN alone: port %d, want 48002", c.Port)
	}
	if c := parse(t, []string{"--listen", "127.0.0.1:0"}, nil); c.Port != 0 || len(c.Warnings) != 0 {
		t.Errorf("--listen :0 alone: port %d (0: the picked port is announced), warnings %q", c.Port, c.Warnings)
	}
	if c := parse(t, []string{"--port", "30005"}, nil); c.Listen != ":30005" || c.Port != 30005 || len(c.Warnings) != 0 {
		t.Errorf("--port alone: listen %q port %d warnings %q", c.Listen, c.Port, c.Warnings)
	}
	if c := parse(t, []string{"--listen", "127.0.0.1:48003", "--port", "48003"}, nil); len(c.Warnings) != 0 {
		t.Errorf("the same port twice warns: %q", c.Warnings)
	}
	c := parse(t, []string{"--listen", "127.0.0.1:48004", "--port", "30001"}, nil)
	if c.Port != 30001 || len(c.Warnings) != 1 {
		t.Fatalf("different ports: port %d, warnings %q; want 30001 and one warning", c.Port, c.Warnings)
	}
	for _, want := range []string{"--listen binds port 48004", "port 30001 (flag --port)", "drop --port"} {
		if !strings.Contains(c.Warnings[0], want) {
			t.Errorf("warning %q lacks %q", c.Warnings[0], want)
		}
	}
}
