package main

import (
	"reflect"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/worker"
)

// --master takes one URL or a list, from flag, env or file; each entry is
// checked as a single URL was.
func TestWorkerMasterList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
	}{
		{"flag", []string{"--master", "http://m1:30000, https://m2:30000/,http://10.0.0.3:1"}, nil, ""},
		{"env", nil, map[string]string{"SM_MASTER": "http://m1:30000,https://m2:30000/,http://10.0.0.3:1"}, ""},
		{"file", nil, nil, `{"NodeSetting":{"Master":"http://m1:30000,https://m2:30000/,http://10.0.0.3:1"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--identity", "w1", "--cluster-key", testKey}, tc.args...)
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			c, _, err := parseWorkerConfig(args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"http://m1:30000", "https://m2:30000", "http://10.0.0.3:1"}
			if got := worker.MasterURLs(c.MasterURL); !reflect.DeepEqual(got, want) {
				t.Fatalf("masters %q, want %q", got, want)
			}
		})
	}
	bad := []struct {
		name, master string
		want         []string
	}{
		{"empty entry", "http://m1:1,,http://m2:1", []string{"flag --master:", "has an empty entry"}},
		{"trailing comma", "http://m1:1,", []string{"has an empty entry"}},
		{"bad second entry", "http://m1:1,ftp://m2:1", []string{"flag --master:", `"ftp://m2:1" must start with http:// or https://`}},
		{"path in an entry", "http://m1:1,http://m2:1/api", []string{"must be just http(s)://host[:port]"}},
		{"twice", "http://m1:1,http://M1:1/", []string{`lists "http://M1:1" twice`}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseWorkerConfig([]string{"--identity", "w1", "--cluster-key", testKey, "--master", tc.master}, envMap(nil))
			assertProblems(t, err, tc.want)
		})
	}
}

// --cluster defaults to "master" (the default identity, so today's workers'
// --workerof keeps working) and is set by flag, env or file.
func TestMasterCluster(t *testing.T) {
	t.Parallel()
	c, _, err := parseMasterConfig(nil, envMap(nil))
	if err != nil || c.Cluster != "master" {
		t.Fatalf("default cluster %q, %v", c.Cluster, err)
	}
	if c, _, err = parseMasterConfig([]string{"--identity", "m2", "--cluster", "prod"}, envMap(nil)); err != nil || c.Cluster != "prod" || c.Identity != "m2" {
		t.Fatalf("flag: %+v %v", c, err)
	}
	if c, _, err = parseMasterConfig(nil, envMap(map[string]string{"SM_CLUSTER": "prod-env"})); err != nil || c.Cluster != "prod-env" {
		t.Fatalf("env: %q %v", c.Cluster, err)
	}
	file := writeFile(t, `{"Master": {"Cluster": "prod-file"}}`)
	if c, _, err = parseMasterConfig([]string{"--config", file}, envMap(nil)); err != nil || c.Cluster != "prod-file" {
		t.Fatalf("file: %q %v", c.Cluster, err)
	}
	_, _, err = parseMasterConfig([]string{"--cluster", "a b"}, envMap(nil))
	assertProblems(t, err, []string{"flag --cluster: may hold only"})
}
