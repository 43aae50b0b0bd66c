package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envMap is a lookupEnv over a fixed map, so tests ignore the process env.
func envMap(m map[string]string) lookupEnvFunc {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// writeFile writes a config file into a temp dir and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testKey = "0123456789abcdef0123"

// workerBase is the minimal valid worker command line.
var workerBase = []string{"--identity", "w1", "--master", "http://127.0.0.1:30000", "--cluster-key", testKey}

func TestWorkerDefaults(t *testing.T) {
	t.Parallel()
	c, _, err := parseWorkerConfig(workerBase, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := workerConfig{Listen: ":30001"}
	want.Identity, want.Protocol, want.IP, want.Port = "w1", "http", "127.0.0.1", 30001
	want.Priority, want.MaxConcurrency, want.AutoRegister = 1, 20, true
	want.MasterURL, want.ClusterKey, want.DataDir = "http://127.0.0.1:30000", testKey, "./data/worker-w1"
	want.ReadTimeout = 30 * time.Second // --read-timeout default
	want.StopTimeout = 30 * time.Second // --drain-timeout default
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestWorkerPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{"NodeSetting": {"Port": 40000, "Priority": "7", "IP": "10.0.0.9", "Protocol": "https",
		"maxconcurrency": 5, "AllowShell": true, "WorkerOf": "m-file", "Listen": "0.0.0.0:40000"},
		"Logging": {"ignored": "other sections are not ours"}}`)
	args := func(extra ...string) []string {
		return append(append([]string{"--config", file}, workerBase...), extra...)
	}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(c workerConfig) (got, want any)
	}{
		{"file beats default", args(), nil, func(c workerConfig) (any, any) { return c.Port, 40000 }},
		{"env beats file", args(), map[string]string{"SM_PORT": "40001"}, func(c workerConfig) (any, any) { return c.Port, 40001 }},
		{"flag beats env", args("--port", "40002"), map[string]string{"SM_PORT": "40001"}, func(c workerConfig) (any, any) { return c.Port, 40002 }},
		{"empty env is unset", args(), map[string]string{"SM_PORT": ""}, func(c workerConfig) (any, any) { return c.Port, 40000 }},
		{"file string number", args(), nil, func(c workerConfig) (any, any) { return c.Priority, 7 }},
		{"file keys ignore case", args(), nil, func(c workerConfig) (any, any) { return c.MaxConcurrency, 5 }},
		{"file bool", args(), nil, func(c workerConfig) (any, any) { return c.AllowShell, true }},
		{"env bool beats file", args(), map[string]string{"SM_ALLOW_SHELL": "false"}, func(c workerConfig) (any, any) { return c.AllowShell, false }},
		{"file listen", args(), nil, func(c workerConfig) (any, any) { return c.Listen, "0.0.0.0:40000" }},
		{"listen defaults to port", append([]string(nil), append(workerBase, "--port", "31000")...), nil,
			func(c workerConfig) (any, any) { return c.Listen, ":31000" }},
		{"SM_WORKEROF beats file", args(), map[string]string{"SM_WORKEROF": "m-env"}, func(c workerConfig) (any, any) { return c.WorkerOf, "m-env" }},
		{"SMCORE_WORKEROF beats file", args(), map[string]string{"SMCORE_WORKEROF": "m-core"}, func(c workerConfig) (any, any) { return c.WorkerOf, "m-core" }},
		{"SM_WORKEROF beats SMCORE_WORKEROF", args(), map[string]string{"SM_WORKEROF": "m-env", "SMCORE_WORKEROF": "m-core"},
			func(c workerConfig) (any, any) { return c.WorkerOf, "m-env" }},
		{"flag workerof beats env", args("--workerof", "m-flag"), map[string]string{"SMCORE_WORKEROF": "m-core"},
			func(c workerConfig) (any, any) { return c.WorkerOf, "m-flag" }},
		{"env identity", []string{"--master", "http://m:1", "--cluster-key", testKey}, map[string]string{"SM_IDENTITY": "w9", "SM_CLUSTER_KEY": testKey},
			func(c workerConfig) (any, any) { return c.Identity + " " + c.DataDir, "w9 ./data/worker-w9" }},
		{"config path from env", workerBase, map[string]string{"SM_CONFIG": file}, func(c workerConfig) (any, any) { return c.Protocol, "https" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := parseWorkerConfig(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestWorkerAutoRegister(t *testing.T) {
	t.Parallel()
	manual := append([]string{"--workerof", "master"}, workerBase...)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default on", manual, nil, true},
		{"SMCORE_AUTOR=false", manual, map[string]string{"SMCORE_AUTOR": "false"}, false},
		{"SMCORE_AUTOR=true", manual, map[string]string{"SMCORE_AUTOR": "true"}, true},
		{"SMCORE_AUTOR=False is not exactly false", manual, map[string]string{"SMCORE_AUTOR": "False"}, true},
		{"SMCORE_AUTOR=0 is not exactly false", manual, map[string]string{"SMCORE_AUTOR": "0"}, true},
		{"SMCORE_AUTOR=anything", manual, map[string]string{"SMCORE_AUTOR": "nope"}, true},
		{"SMCORE_AUTOR empty is unset", manual, map[string]string{"SMCORE_AUTOR": ""}, true},
		{"SM_AUTOR=false", manual, map[string]string{"SM_AUTOR": "false"}, false},
		{"SM_AUTOR beats SMCORE_AUTOR", manual, map[string]string{"SM_AUTOR": "true", "SMCORE_AUTOR": "false"}, true},
		{"flag --autor beats env false", append([]string{"--autor"}, manual...), map[string]string{"SMCORE_AUTOR": "false"}, true},
		{"flag --autor=false beats env true", append([]string{"--autor=false"}, manual...), map[string]string{"SMCORE_AUTOR": "true"}, false},
		{"flag --autor=true beats SM_AUTOR", append([]string{"--autor=true"}, manual...), map[string]string{"SM_AUTOR": "false"}, true},
		{"file AutoRegister", append([]string{"--config", writeFile(t, `{"NodeSetting":{"AutoRegister":false}}`)}, manual...), nil, false},
		{"env beats file AutoRegister", append([]string{"--config", writeFile(t, `{"NodeSetting":{"AutoRegister":false}}`)}, manual...),
			map[string]string{"SMCORE_AUTOR": "true"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := parseWorkerConfig(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.AutoRegister != tc.want {
				t.Errorf("AutoRegister = %v, want %v", c.AutoRegister, tc.want)
			}
		})
	}
}

func TestWorkerManualModeNeedsNoIdentity(t *testing.T) {
	t.Parallel()
	c, _, err := parseWorkerConfig([]string{"--autor=false", "--master", "http://m:30000", "--cluster-key", testKey},
		envMap(map[string]string{"SMCORE_WORKEROF": "master"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity != "" || c.WorkerOf != "master" || c.DataDir != "./data/worker" {
		t.Errorf("got %+v", c)
	}
}

// TestProcessEnv checks the wiring to the real environment through t.Setenv.
func TestProcessEnv(t *testing.T) {
	t.Setenv("SM_CLUSTER_KEY", testKey)
	t.Setenv("SMCORE_AUTOR", "false")
	t.Setenv("SMCORE_WORKEROF", "boss")
	t.Setenv("SM_HEALTH_INTERVAL", "42s")
	c, _, err := parseWorkerConfig([]string{"--master", "http://m:30000"}, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.AutoRegister || c.WorkerOf != "boss" || c.ClusterKey != testKey {
		t.Errorf("got %+v", c)
	}
	m, _, err := parseMasterConfig(nil, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if m.HealthInterval != 42*time.Second || !m.HealthIntervalSet {
		t.Errorf("health interval %v set=%v", m.HealthInterval, m.HealthIntervalSet)
	}
}

func TestMasterDefaults(t *testing.T) {
	t.Parallel()
	c, _, err := parseMasterConfig(nil, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":30000" || c.DataDir != "./data" || c.Identity != "master" || c.DB != "" ||
		c.DSN.Path != filepath.Join("data", "schedulemaster.db") || c.AdminPassword != "" || c.ClusterKey != "" ||
		c.HealthInterval != 10*time.Second || c.HealthTimeout != 3*time.Second || c.MaxFailures != 3 ||
		c.HealthIntervalSet || c.HealthTimeoutSet || c.MaxFailuresSet || c.TLS() {
		t.Errorf("got %+v", c)
	}
}

func TestMasterPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `{"Master": {"HealthInterval": "20s", "MaxFailures": 4, "DataDir": "/srv/sm", "Identity": "m-file"}}`)
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(c masterConfig) (got, want any)
	}{
		{"file", []string{"--config", file}, nil, func(c masterConfig) (any, any) {
			return []any{c.HealthInterval, c.HealthIntervalSet, c.MaxFailures, c.Identity}, []any{20 * time.Second, true, 4, "m-file"}
		}},
		{"file data dir places the database", []string{"--config", file}, nil, func(c masterConfig) (any, any) {
			return c.DSN.Path, filepath.Join("/srv/sm", "schedulemaster.db")
		}},
		{"env beats file", []string{"--config", file}, map[string]string{"SM_HEALTH_INTERVAL": "30s", "SM_MAX_FAILURES": "5"},
			func(c masterConfig) (any, any) {
				return []any{c.HealthInterval, c.MaxFailures}, []any{30 * time.Second, 5}
			}},
		{"flag beats env", []string{"--config", file, "--health-interval", "40s"}, map[string]string{"SM_HEALTH_INTERVAL": "30s"},
			func(c masterConfig) (any, any) { return c.HealthInterval, 40 * time.Second }},
		{"unset health stays unset", []string{"--config", file}, nil,
			func(c masterConfig) (any, any) {
				return []any{c.HealthTimeoutSet, c.HealthTimeout}, []any{false, 3 * time.Second}
			}},
		{"env db", nil, map[string]string{"SM_DB": "sqlite:///tmp/x.db"}, func(c masterConfig) (any, any) { return c.DSN.Path, "/tmp/x.db" }},
		{"single-dash flags work", []string{"-listen", "127.0.0.1:1234"}, nil, func(c masterConfig) (any, any) { return c.Listen, "127.0.0.1:1234" }},
		{"tls pair", []string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, nil, func(c masterConfig) (any, any) { return c.TLS(), true }},
		{"env secrets", nil, map[string]string{"SM_ADMIN_PASSWORD": "s3cretpass", "SM_CLUSTER_KEY": testKey},
			func(c masterConfig) (any, any) { return c.AdminPassword + " " + c.ClusterKey, "s3cretpass " + testKey }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := parseMasterConfig(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestMasterBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string // config file content; "" = none
		want []string
	}{
		{"env duration", nil, map[string]string{"SM_HEALTH_INTERVAL": "abc"}, "",
			[]string{`env SM_HEALTH_INTERVAL: "abc" is not a duration`}},
		{"flag duration too short", []string{"--health-interval", "500ms"}, nil, "",
			[]string{"flag --health-interval: 500ms is out of range (1s to 1h0m0s)"}},
		{"flag duration too long", []string{"--health-interval", "2h"}, nil, "",
			[]string{"flag --health-interval: 2h0m0s is out of range"}},
		{"timeout range", []string{"--health-timeout", "50ms"}, nil, "",
			[]string{"flag --health-timeout: 50ms is out of range (100ms to 1m0s)"}},
		{"max failures zero", []string{"--max-failures", "0"}, nil, "", []string{"flag --max-failures: 0 is out of range (1 to 100)"}},
		{"max failures env", nil, map[string]string{"SM_MAX_FAILURES": "lots"}, "", []string{`env SM_MAX_FAILURES: "lots" is not a whole number`}},
		{"file duration", nil, nil, `{"Master":{"HealthTimeout":"soon"}}`, []string{`Master.HealthTimeout: "soon" is not a duration`}},
		{"file number as duration", nil, nil, `{"Master":{"HealthInterval":10}}`, []string{`Master.HealthInterval: "10" is not a duration`}},
		{"file unknown key", nil, nil, `{"Master":{"Listen":":1","Lisen":":2"}}`, []string{`Master.Lisen: unknown key`}},
		{"file duplicate key", nil, nil, `{"Master":{"Listen":":1","listen":":2"}}`, []string{`key given twice`}},
		{"file object value", nil, nil, `{"Master":{"Listen":{"a":1}}}`, []string{`Master.Listen: must be a string, number or boolean`}},
		{"file bad JSON", nil, nil, `{"Master":`, []string{`not a JSON object`}},
		{"file no section", nil, nil, `{"NodeSetting":{}}`, []string{`no "Master" section`}},
		{"file section not object", nil, nil, `{"Master":[1]}`, []string{`section "Master" must be a JSON object`}},
		{"short cluster key", []string{"--cluster-key", "short"}, nil, "", []string{"flag --cluster-key: must be at least 16 characters"}},
		{"short admin password", nil, map[string]string{"SM_ADMIN_PASSWORD": "1234567"}, "", []string{"env SM_ADMIN_PASSWORD: must be at least 10 characters"}},
		// The first admin obeys the users' password rule: 9 characters were enough for it once.
		{"admin password below the users' rule", []string{"--admin-password", "123456789"}, nil, "", []string{"flag --admin-password: must be at least 10 characters"}},
		{"admin password over bcrypt's 72 bytes", []string{"--admin-password", strings.Repeat("p", 73)}, nil, "", []string{"flag --admin-password: must be at most 72 bytes"}},
		{"tls half", []string{"--tls-cert", "c.pem"}, nil, "", []string{"--tls-cert and --tls-key go together"}},
		{"bad db scheme", []string{"--db", "oracle://x"}, nil, "", []string{`flag --db: unknown scheme`}},
		{"postgres without a database", []string{"--db", "postgres://x"}, nil, "", []string{`flag --db: the PostgreSQL URL names no database`}},
		{"bad identity", []string{"--identity", "no spaces"}, nil, "", []string{"flag --identity: may hold only"}},
		{"bad listen", []string{"--listen", "30000"}, nil, "", []string{`flag --listen: "30000" must be [host]:port`}},
		{"bad advertise", []string{"--advertise", "10.0.0.1"}, nil, "", []string{"flag --advertise: must be host:port"}},
		{"positional", []string{"extra"}, nil, "", []string{`unexpected argument "extra"`}},
		{"every problem at once", []string{"--max-failures", "x", "--health-timeout", "1h"}, map[string]string{"SM_HEALTH_INTERVAL": "0s"}, "",
			[]string{"flag --max-failures", "flag --health-timeout", "env SM_HEALTH_INTERVAL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			_, _, err := parseMasterConfig(args, envMap(tc.env))
			assertProblems(t, err, tc.want)
		})
	}
}

func TestWorkerBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want []string
	}{
		{"port negative", []string{"--port", "-1"}, nil, "", []string{"flag --port: -1 is out of range (0 to 65535)"}},
		{"port text", nil, map[string]string{"SM_PORT": "http"}, "", []string{`env SM_PORT: "http" is not a whole number`}},
		{"priority", []string{"--priority", "1001"}, nil, "", []string{"flag --priority: 1001 is out of range (0 to 1000)"}},
		{"maxc", nil, nil, `{"NodeSetting":{"MaxConcurrency":0}}`, []string{"NodeSetting.MaxConcurrency: 0 is out of range (1 to 10000)"}},
		{"maxc fraction", nil, nil, `{"NodeSetting":{"MaxConcurrency":2.5}}`, []string{`NodeSetting.MaxConcurrency: "2.5" is not a whole number`}},
		{"protocol", []string{"--protocol", "ftp"}, nil, "", []string{`flag --protocol: "ftp" must be http or https`}},
		{"ip", nil, map[string]string{"SM_IP": "bad host!"}, "", []string{"env SM_IP:"}},
		{"master scheme", []string{"--master", "ftp://m:1"}, nil, "", []string{"flag --master:", "must start with http:// or https://"}},
		{"master path", []string{"--master", "http://m:1/api"}, nil, "", []string{"must be just http(s)://host[:port]"}},
		{"master no host", []string{"--master", "http://:30000"}, nil, "", []string{"has no host"}},
		{"master port", []string{"--master", "http://m:99999"}, nil, "", []string{"port must be from 1 to 65535"}},
		{"master bare", []string{"--master", "m:30000"}, nil, "", []string{"flag --master:"}},
		{"short key", []string{"--cluster-key", "abc"}, nil, "", []string{"flag --cluster-key: must be at least 16 characters"}},
		{"bad identity", []string{"--identity", "-w"}, nil, "", []string{"flag --identity: may hold only"}},
		{"flag bool strict", []string{"--autor=maybe"}, nil, "", []string{`flag --autor: "maybe" is not a boolean`}},
		{"env bool strict", nil, map[string]string{"SM_ALLOW_SHELL": "yes"}, "", []string{`env SM_ALLOW_SHELL: "yes" is not a boolean`}},
		{"file bool strict", nil, nil, `{"NodeSetting":{"AllowShell":"yes"}}`, []string{`NodeSetting.AllowShell: "yes" is not a boolean`}},
		{"file unknown key", nil, nil, `{"NodeSetting":{"Identity":"w1"}}`, []string{"NodeSetting.Identity: unknown key (known: Listen, Port, IdentityName"}},
		{"bad listen", []string{"--listen", "nope"}, nil, "", []string{`flag --listen: "nope" must be [host]:port`}},
		{"bad workerof", []string{"--workerof", "a b"}, nil, "", []string{"flag --workerof: may hold only"}},
		{"unknown flag", []string{"--colour", "red"}, nil, "", []string{"flag provided but not defined: -colour"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string(nil), workerBase...), tc.args...)
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, tc.file)}, args...)
			}
			_, _, err := parseWorkerConfig(args, envMap(tc.env))
			assertProblems(t, err, tc.want)
		})
	}
}

// --labels, SM_LABELS and the file's Labels (a string or an object) give
// the worker's labels by the usual precedence; a bad label is a start-up
// problem naming the label and where it came from.
func TestWorkerLabelsConfig(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, file string, env map[string]string, extra ...string) (workerConfig, error) {
		t.Helper()
		args := append(append([]string(nil), workerBase...), extra...)
		if file != "" {
			args = append([]string{"--config", writeFile(t, file)}, args...)
		}
		c, _, err := parseWorkerConfig(args, envMap(env))
		return c, err
	}
	good := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string // Labels.String()
	}{
		{"none", "", nil, nil, ""},
		{"flag", "", nil, []string{"--labels", "pool=billing, zone=eu-1"}, "pool=billing,zone=eu-1"},
		{"env", "", map[string]string{"SM_LABELS": "zone=eu-1"}, nil, "zone=eu-1"},
		{"file string", `{"NodeSetting":{"Labels":"pool=a,gpu="}}`, nil, nil, "gpu=,pool=a"},
		{"file object", `{"NodeSetting":{"labels":{"pool":"a","example.com/zone":"eu-1"}}}`, nil, nil, "example.com/zone=eu-1,pool=a"},
		{"env beats file", `{"NodeSetting":{"Labels":{"pool":"a"}}}`, map[string]string{"SM_LABELS": "pool=b"}, nil, "pool=b"},
		{"flag beats env", "", map[string]string{"SM_LABELS": "pool=b"}, []string{"--labels", "pool=c"}, "pool=c"},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := parse(t, tc.file, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Labels.String() != tc.want || (tc.want == "") != (c.Labels == nil) {
				t.Fatalf("labels %#v, want %q", c.Labels, tc.want)
			}
		})
	}
	bad := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{"flag value", "", nil, []string{"--labels", "pool=billing,zone=eu 1"}, `flag --labels: label "zone=eu 1": value must be`},
		{"env no value", "", map[string]string{"SM_LABELS": "pool"}, nil, `env SM_LABELS: label "pool": must be key=value`},
		{"flag twice", "", nil, []string{"--labels", "a=1,a=2"}, `label "a=2": key "a" is given twice`},
		{"flag NUL", "", nil, []string{"--labels", "a=\x00"}, `label "a=\x00"`},
		{"file string", `{"NodeSetting":{"Labels":"_a=1"}}`, nil, nil, `NodeSetting.Labels: label "_a=1": key must be`},
		{"file object comma", `{"NodeSetting":{"Labels":{"a":"b,c=d"}}}`, nil, nil, `NodeSetting.Labels: label "a=b,c=d": value must be`},
		{"file object number", `{"NodeSetting":{"Labels":{"a":1}}}`, nil, nil, `NodeSetting.Labels: must be "key=value,key=value" or an object of strings`},
		{"file object twice", `{"NodeSetting":{"Labels":{"a":"1","a":"2"}}}`, nil, nil, `NodeSetting.Labels: label key "a" is given twice`},
		{"file array", `{"NodeSetting":{"Labels":["a=1"]}}`, nil, nil, `NodeSetting.Labels: must be "key=value,key=value" or an object`},
		{"too many", "", nil, []string{"--labels", "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1,j=1,k=1,l=1,m=1,n=1,o=1,p=1,q=1"}, "more than 16 labels"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(t, tc.file, tc.env, tc.args...)
			assertProblems(t, err, []string{tc.want})
		})
	}
}

// --drain-timeout (SM_DRAIN_TIMEOUT, DrainTimeout) is the worker's stop grace.
func TestWorkerDrainTimeoutConfig(t *testing.T) {
	t.Parallel()
	c, _, err := parseWorkerConfig(append(append([]string(nil), workerBase...), "--drain-timeout", "2m"), envMap(nil))
	if err != nil || c.StopTimeout != 2*time.Minute {
		t.Fatalf("--drain-timeout 2m: %v, %v", c.StopTimeout, err)
	}
	file := writeFile(t, `{"NodeSetting":{"DrainTimeout":"45s"}}`)
	c, _, err = parseWorkerConfig(append([]string{"--config", file}, workerBase...), envMap(nil))
	if err != nil || c.StopTimeout != 45*time.Second {
		t.Fatalf("file DrainTimeout 45s: %v, %v", c.StopTimeout, err)
	}
	_, _, err = parseWorkerConfig(workerBase, envMap(map[string]string{"SM_DRAIN_TIMEOUT": "0s"}))
	assertProblems(t, err, []string{"env SM_DRAIN_TIMEOUT: 0s is out of range (1s to 24h0m0s)"})
}

func TestWorkerRequired(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"nothing", nil, nil, []string{"--identity: is required when the worker registers itself",
			"--master: is required", "--cluster-key: is required"}},
		{"manual without workerof", []string{"--autor=false", "--master", "http://m:1", "--cluster-key", testKey}, nil,
			[]string{"--workerof: is required when --autor=false"}},
		{"env manual without workerof", []string{"--master", "http://m:1", "--cluster-key", testKey},
			map[string]string{"SMCORE_AUTOR": "false"}, []string{"is required when --autor=false"}},
		{"missing config file", []string{"--config", "/nonexistent/sm.json"}, nil, []string{"config file: open /nonexistent/sm.json"}},
		{"bad values and missing values together", []string{"--port", "x", "--master", "ftp://m"}, nil,
			[]string{`flag --port: "x" is not a whole number`, "flag --master: \"ftp://m\" must start with http://",
				"--identity: is required", "--cluster-key: is required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseWorkerConfig(tc.args, envMap(tc.env))
			assertProblems(t, err, tc.want)
		})
	}
}

func TestTokenConfig(t *testing.T) {
	t.Parallel()
	masterFile := writeFile(t, `{"Master":{"Listen":":30000","DataDir":"/srv/sm","HealthInterval":"5s"}}`)
	c, _, err := parseTokenConfig([]string{"--name", "ci", "--config", masterFile}, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "ci" || c.DSN.Path != filepath.Join("/srv/sm", "schedulemaster.db") {
		t.Errorf("got %+v", c)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no name", nil, []string{"--name: is required"}},
		{"blank name", []string{"--name", "  "}, []string{"--name: is required"}},
		{"long name", []string{"--name", strings.Repeat("x", 65)}, []string{"--name: is longer than 64 characters"}},
		{"control char", []string{"--name", "a\nb"}, []string{"--name: may not hold control characters"}},
		{"unknown key still fails", []string{"--name", "x", "--config", writeFile(t, `{"Master":{"Bogus":1}}`)}, []string{"Master.Bogus: unknown key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseTokenConfig(tc.args, envMap(nil))
			assertProblems(t, err, tc.want)
		})
	}
}

// A bad value falls back to its default for the later checks, so it is
// reported once, without follow-on problems.
func TestNoFollowOnProblems(t *testing.T) {
	t.Parallel()
	_, _, err := parseWorkerConfig(append([]string{"--port", "x"}, workerBase...), envMap(nil))
	var ce *configError
	if !errors.As(err, &ce) || len(ce.problems) != 1 {
		t.Fatalf("want exactly one problem, got %v", err)
	}
}

func TestHelpFlag(t *testing.T) {
	t.Parallel()
	_, _, err := parseWorkerConfig([]string{"-h"}, envMap(nil))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
}

// assertProblems checks that err is a configError mentioning every wanted text.
func assertProblems(t *testing.T, err error, want []string) {
	t.Helper()
	var ce *configError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a configError", err)
	}
	all := ce.Error()
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems do not mention %q:\n%s", w, all)
		}
	}
}

// SM_WORKER_CLOCK_OFFSET (for tests) sets the worker's clock that far off
// the real one; unset it is the real clock, and nonsense is refused.
func TestWorkerClockOffsetEnv(t *testing.T) {
	t.Parallel()
	c, _, err := parseWorkerConfig(workerBase, envMap(map[string]string{"SM_WORKER_CLOCK_OFFSET": "3s"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Now == nil {
		t.Fatal("SM_WORKER_CLOCK_OFFSET=3s set no clock")
	}
	if d := c.Now().Sub(time.Now()); d < 2900*time.Millisecond || d > 3100*time.Millisecond {
		t.Errorf("the clock is %s ahead, want 3s", d)
	}
	if c, _, err := parseWorkerConfig(workerBase, envMap(nil)); err != nil || c.Now != nil {
		t.Errorf("without SM_WORKER_CLOCK_OFFSET: clock set %v, err %v", c.Now != nil, err)
	}
	for _, bad := range []string{"soon", "2h", "-90m"} {
		_, _, err := parseWorkerConfig(workerBase, envMap(map[string]string{"SM_WORKER_CLOCK_OFFSET": bad}))
		if err == nil || !strings.Contains(err.Error(), "SM_WORKER_CLOCK_OFFSET") {
			t.Errorf("SM_WORKER_CLOCK_OFFSET=%s: %v, want refused", bad, err)
		}
	}
}
