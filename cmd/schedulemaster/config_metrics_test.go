package main

import "testing"

// --metrics-listen is read from flag, env and file, and refused when it is
// not an address or is the worker API's own.
func TestWorkerMetricsListen(t *testing.T) {
	t.Parallel()
	c, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), "--metrics-listen", "127.0.0.1:9101"), envMap(nil))
	if err != nil || c.MetricsListen != "127.0.0.1:9101" {
		t.Fatalf("flag: %q, %v", c.MetricsListen, err)
	}
	c, _, err = parseWorkerConfig(workerBase, envMap(map[string]string{"SM_METRICS_LISTEN": ":9102"}))
	if err != nil || c.MetricsListen != ":9102" {
		t.Fatalf("env: %q, %v", c.MetricsListen, err)
	}
	c, _, err = parseWorkerConfig(append([]string{"--config", writeFile(t, `{"NodeSetting":{"MetricsListen":"0.0.0.0:9103"}}`)}, workerBase...), envMap(nil))
	if err != nil || c.MetricsListen != "0.0.0.0:9103" {
		t.Fatalf("file: %q, %v", c.MetricsListen, err)
	}
	if c, _, err := parseWorkerConfig(workerBase, envMap(nil)); err != nil || c.MetricsListen != "" {
		t.Fatalf("default: %q, %v; want none", c.MetricsListen, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-listen", "nope"}, `flag --metrics-listen: "nope" must be [host]:port`},
		{[]string{"--metrics-listen", ":70000"}, "flag --metrics-listen:"},
		{[]string{"--metrics-listen", ":30001"}, `flag --metrics-listen: ":30001" is the worker API's address`},
		{[]string{"--listen", "127.0.0.1:4000", "--metrics-listen", "0.0.0.0:4000"}, "is the worker API's address"},
	} {
		_, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), tc.args...), envMap(nil))
		assertProblems(t, err, []string{tc.want})
	}
	// Another host on the same port, or port 0, is fine.
	if _, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), "--listen", "10.0.0.1:4000", "--metrics-listen", "127.0.0.1:4000"), envMap(nil)); err != nil {
		t.Fatalf("same port on another address: %v", err)
	}
	if _, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), "--port", "0", "--metrics-listen", ":0"), envMap(nil)); err != nil {
		t.Fatalf("both on port 0: %v", err)
	}
}
