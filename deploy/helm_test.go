package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// rendered is a chart's output decoded strictly into the API types.
type rendered struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	secrets         map[string]*corev1.Secret
	configMaps      map[string]*corev1.ConfigMap
	serviceAccounts map[string]*corev1.ServiceAccount
	pdbs            map[string]*policyv1.PodDisruptionBudget
	ingresses       map[string]*networkingv1.Ingress
	serviceMonitors map[string]map[string]any
	notes           string
}

func chartDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "deploy/helm/schedulemaster")
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return ch
}

// renderChart renders the chart as `helm template` would with the values
// given in YAML (merged over values.yaml).
func renderChart(t *testing.T, valuesYAML string) (*rendered, error) {
	t.Helper()
	ch := loadChart(t)
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals.AsMap(), chartutil.ReleaseOptions{Name: "sm", Namespace: "jobs", Revision: 1, IsInstall: true}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{},
		configMaps: map[string]*corev1.ConfigMap{}, serviceAccounts: map[string]*corev1.ServiceAccount{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		ingresses: map[string]*networkingv1.Ingress{}, serviceMonitors: map[string]map[string]any{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = files[name]
			continue
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(files[name], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			if err := r.add(doc); err != nil {
				t.Fatalf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	return r, nil
}

// stripComments drops whole-line YAML comments (a template may render only those).
func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// add decodes one manifest into its API type, refusing a field the type
// does not have (a typo), a duplicate key and an unknown kind.
func (r *rendered) add(doc string) error {
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return err
	}
	var head struct{ APIVersion, Kind string }
	if err := json.Unmarshal(js, &head); err != nil {
		return err
	}
	strict := func(dst any) error {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("%s %s: %w", head.APIVersion, head.Kind, err)
		}
		return nil
	}
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		err = strict(&o)
		r.deployments[o.Name] = &o
	case "v1 Service":
		var o corev1.Service
		err = strict(&o)
		r.services[o.Name] = &o
	case "v1 Secret":
		var o corev1.Secret
		err = strict(&o)
		r.secrets[o.Name] = &o
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		err = strict(&o)
		r.configMaps[o.Name] = &o
	case "v1 ServiceAccount":
		var o corev1.ServiceAccount
		err = strict(&o)
		r.serviceAccounts[o.Name] = &o
	case "policy/v1 PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		err = strict(&o)
		r.pdbs[o.Name] = &o
	case "networking.k8s.io/v1 Ingress":
		var o networkingv1.Ingress
		err = strict(&o)
		r.ingresses[o.Name] = &o
	case "monitoring.coreos.com/v1 ServiceMonitor":
		// No Go type here without the operator's module: the fields the
		// chart relies on are checked by the tests.
		var o map[string]any
		err = json.Unmarshal(js, &o)
		name, _ := dig(o, "metadata", "name").(string)
		r.serviceMonitors[name] = o
	default:
		return fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
	return err
}

// dig walks nested maps (and list indexes) of decoded JSON.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

const minimalValues = `
secrets:
  clusterKey: chart-test-cluster-key-0123456789
  databaseDSN: mysql://sm:pw@tcp(mariadb:3306)/schedulemaster
`

func mustRender(t *testing.T, values string) *rendered {
	t.Helper()
	r, err := renderChart(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if d == nil {
		t.Fatal("no such Deployment")
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s has %d containers", d.Name, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

func envOf(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// checkCommon holds for every value set: selectors select their pods, env
// secrets exist, probes and identity are right, the grace period covers
// the drain.
func checkCommon(t *testing.T, r *rendered, secretName string, createsSecret bool) {
	t.Helper()
	if _, ok := r.secrets[secretName]; ok != createsSecret {
		t.Errorf("Secret %s rendered = %v, want %v", secretName, ok, createsSecret)
	}
	for name, d := range r.deployments {
		sel := d.Spec.Selector.MatchLabels
		for k, v := range sel {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: selector %s=%s does not match the pod labels %v", name, k, v, d.Spec.Template.Labels)
			}
		}
		c := container(t, d)
		spec := d.Spec.Template.Spec
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("%s: pod does not run as non-root uid 65532: %+v", name, sc)
		}
		id := envOf(c, "SM_IDENTITY")
		if id == nil || id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("%s: SM_IDENTITY is not the pod's name (downward API): %+v", name, id)
		}
		key := envOf(c, "SM_CLUSTER_KEY")
		if key == nil || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || key.ValueFrom.SecretKeyRef.Name != secretName {
			t.Errorf("%s: SM_CLUSTER_KEY not from Secret %s: %+v", name, secretName, key)
		} else if s := r.secrets[secretName]; s != nil {
			if _, ok := s.StringData[key.ValueFrom.SecretKeyRef.Key]; !ok {
				t.Errorf("%s: Secret %s has no key %s", name, secretName, key.ValueFrom.SecretKeyRef.Key)
			}
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
			t.Errorf("%s: liveness probe %+v, want GET /health", name, c.LivenessProbe)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet != nil && !ports[p.HTTPGet.Port.StrVal] {
				t.Errorf("%s: a probe uses port %q, not a port of the container", name, p.HTTPGet.Port.String())
			}
		}
		switch d.Labels["app.kubernetes.io/component"] {
		case "master":
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" {
				t.Errorf("%s: readiness probe %+v, want GET /ready", name, c.ReadinessProbe)
			}
			if db := envOf(c, "SM_DB"); db == nil || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil || db.ValueFrom.SecretKeyRef.Name != secretName {
				t.Errorf("%s: SM_DB not from Secret %s: %+v", name, secretName, db)
			}
			if c.Args[0] != "master" {
				t.Errorf("%s: args %v", name, c.Args)
			}
		case "worker":
			if c.Args[0] != "worker" {
				t.Errorf("%s: args %v", name, c.Args)
			}
			drain := argAfter(c.Args, "--drain-timeout")
			var drainS int64
			if _, err := fmt.Sscanf(drain, "%ds", &drainS); err != nil {
				t.Errorf("%s: --drain-timeout %q", name, drain)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= drainS+15 {
				t.Errorf("%s: terminationGracePeriodSeconds %v must exceed the drain timeout %ds + 15", name, g, drainS)
			}
			if ip := envOf(c, "SM_IP"); ip == nil || ip.Value != "$(POD_IP)" {
				t.Errorf("%s: SM_IP %+v, want the pod IP", name, ip)
			}
		default:
			t.Errorf("%s: component %q", name, d.Labels["app.kubernetes.io/component"])
		}
	}
	for name, s := range r.services {
		if len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s selects nothing", name)
		}
		matched := false
		for _, d := range r.deployments {
			all := true
			for k, v := range s.Spec.Selector {
				all = all && d.Spec.Template.Labels[k] == v
			}
			matched = matched || all
		}
		if !matched {
			t.Errorf("Service %s selects no pod of the chart: %v", name, s.Spec.Selector)
		}
	}
}

func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func TestChartMinimalValues(t *testing.T) {
	t.Parallel()
	r := mustRender(t, minimalValues)
	checkCommon(t, r, "sm-schedulemaster", true)
	m := r.deployments["sm-schedulemaster-master"]
	if m == nil || *m.Spec.Replicas != 2 {
		t.Fatalf("master Deployment: %+v", m)
	}
	if img := container(t, m).Image; img != "schedulemaster:0.1.0" {
		t.Errorf("master image %q, want the appVersion tag", img)
	}
	w := r.deployments["sm-schedulemaster-worker-default"]
	c := container(t, w)
	if got := argAfter(c.Args, "--labels"); got != "pool=default" {
		t.Errorf("worker --labels %q", got)
	}
	if slices.Contains(c.Args, "--allow-shell") || c.Image != "schedulemaster:0.1.0" {
		t.Errorf("default pool: args %v image %s (no shell by default)", c.Args, c.Image)
	}
	if g := *w.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 60 {
		t.Errorf("worker grace %d, want drain 30 + 30", g)
	}
	if u := envOf(c, "SM_MASTER"); u == nil || u.Value != "http://sm-schedulemaster-master:30000" {
		t.Errorf("SM_MASTER %+v", u)
	}
	pdb := r.pdbs["sm-schedulemaster-master"]
	if pdb == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "master" {
		t.Errorf("PodDisruptionBudget %+v", pdb)
	}
	if len(r.ingresses) != 0 || len(r.serviceMonitors) != 0 || len(r.configMaps) != 0 {
		t.Errorf("optional objects rendered by default: %d ingresses, %d service monitors, %d config maps", len(r.ingresses), len(r.serviceMonitors), len(r.configMaps))
	}
	if s := r.services["sm-schedulemaster-master"]; s == nil || s.Spec.Ports[0].Port != 30000 {
		t.Errorf("master Service %+v", s)
	}
	if !strings.Contains(r.notes, "port-forward svc/sm-schedulemaster-master") {
		t.Errorf("NOTES: %s", r.notes)
	}
}

func TestChartIngressServiceMonitorDashboard(t *testing.T) {
	t.Parallel()
	r := mustRender(t, minimalValues+`
ingress:
  enabled: true
  className: nginx
  host: jobs.example.org
  tls: [{secretName: jobs-tls, hosts: [jobs.example.org]}]
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
  masterToken: {secretName: sm-prometheus-token, key: token}
grafanaDashboard:
  enabled: true
master:
  trustedProxies: 10.0.0.0/8
`)
	checkCommon(t, r, "sm-schedulemaster", true)
	ing := r.ingresses["sm-schedulemaster"]
	if ing == nil || *ing.Spec.IngressClassName != "nginx" || ing.Spec.Rules[0].Host != "jobs.example.org" ||
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "sm-schedulemaster-master" || ing.Spec.TLS[0].SecretName != "jobs-tls" {
		t.Errorf("Ingress %+v", ing)
	}
	if p := envOf(container(t, r.deployments["sm-schedulemaster-master"]), "SM_TRUSTED_PROXIES"); p == nil || p.Value != "10.0.0.0/8" {
		t.Errorf("SM_TRUSTED_PROXIES %+v", p)
	}
	ms, ws := r.serviceMonitors["sm-schedulemaster-master"], r.serviceMonitors["sm-schedulemaster-worker"]
	if ms == nil || ws == nil {
		t.Fatalf("service monitors: %v", r.serviceMonitors)
	}
	if dig(ms, "metadata", "labels", "release") != "prometheus" ||
		dig(ms, "spec", "endpoints", 0, "port") != "http" || dig(ms, "spec", "endpoints", 0, "path") != "/metrics" ||
		dig(ms, "spec", "endpoints", 0, "authorization", "credentials", "name") != "sm-prometheus-token" ||
		dig(ms, "spec", "selector", "matchLabels", "app.kubernetes.io/component") != "master" {
		t.Errorf("master ServiceMonitor %v", ms)
	}
	if dig(ws, "spec", "endpoints", 0, "port") != "metrics" ||
		dig(ws, "spec", "endpoints", 0, "relabelings", 0, "targetLabel") != "pool" ||
		dig(ws, "spec", "selector", "matchLabels", "app.kubernetes.io/component") != "worker" {
		t.Errorf("worker ServiceMonitor %v", ws)
	}
	// The ServiceMonitors' ports are ports of the Services they select.
	if s := r.services["sm-schedulemaster-worker"]; s == nil || s.Spec.Ports[0].Name != "metrics" || s.Spec.ClusterIP != "None" {
		t.Errorf("worker Service %+v", s)
	}
	if r.services["sm-schedulemaster-master"].Spec.Ports[0].Name != "http" {
		t.Error("master Service has no port named http")
	}
	cm := r.configMaps["sm-schedulemaster-dashboard"]
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap %+v", cm)
	}
	var dash struct{ UID, Title string }
	if err := json.Unmarshal([]byte(cm.Data["schedulemaster.json"]), &dash); err != nil || dash.UID != "schedulemaster" {
		t.Errorf("dashboard in the ConfigMap: %v %+v", err, dash)
	}
	if !strings.Contains(r.notes, "https://jobs.example.org/") {
		t.Errorf("NOTES: %s", r.notes)
	}
}

func TestChartSeveralPools(t *testing.T) {
	t.Parallel()
	r := mustRender(t, minimalValues+`
workers:
  drainTimeoutSeconds: 120
  pools:
    - name: default
      replicas: 3
    - name: billing
      replicas: 2
      allowShell: true
      maxConcurrency: 5
      labels: {zone: eu-1, tier: gold}
      nodeSelector: {disk: ssd}
    - name: gpu
      labels: {gpu: ""}
`)
	checkCommon(t, r, "sm-schedulemaster", true)
	want := map[string]struct {
		replicas int32
		labels   string
		shell    bool
		maxc     string
	}{
		"default": {3, "pool=default", false, "20"},
		"billing": {2, "pool=billing,tier=gold,zone=eu-1", true, "5"},
		"gpu":     {1, "pool=gpu,gpu=", false, "20"},
	}
	workers := 0
	for _, d := range r.deployments {
		if d.Labels["app.kubernetes.io/component"] == "worker" {
			workers++
		}
	}
	if workers != len(want) {
		t.Errorf("%d worker Deployments, want %d", workers, len(want))
	}
	for pool, w := range want {
		d := r.deployments["sm-schedulemaster-worker-"+pool]
		c := container(t, d)
		if *d.Spec.Replicas != w.replicas || argAfter(c.Args, "--labels") != w.labels || slices.Contains(c.Args, "--allow-shell") != w.shell || argAfter(c.Args, "--maxc") != w.maxc {
			t.Errorf("pool %s: replicas %d args %v", pool, *d.Spec.Replicas, c.Args)
		}
		if d.Spec.Selector.MatchLabels["schedulemaster.io/pool"] != pool {
			t.Errorf("pool %s: selector %v (pools must not select each other's pods)", pool, d.Spec.Selector.MatchLabels)
		}
		if w.shell != strings.HasSuffix(c.Image, "-worker-shell") {
			t.Errorf("pool %s: image %s", pool, c.Image)
		}
		if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 150 {
			t.Errorf("pool %s: grace %d, want 120 + 30", pool, g)
		}
	}
	if ns := r.deployments["sm-schedulemaster-worker-billing"].Spec.Template.Spec.NodeSelector; ns["disk"] != "ssd" {
		t.Errorf("billing nodeSelector %v", ns)
	}
}

func TestChartExistingSecret(t *testing.T) {
	t.Parallel()
	r := mustRender(t, `
secrets:
  existingSecret: ops-schedulemaster
  keys: {clusterKey: key, databaseDSN: dsn}
image: {repository: registry.example.org/schedulemaster, tag: "1.2.3"}
serviceAccount: {create: false}
master:
  replicas: 3
  podDisruptionBudget: {enabled: false}
`)
	checkCommon(t, r, "ops-schedulemaster", false)
	if len(r.secrets) != 0 || len(r.pdbs) != 0 || len(r.serviceAccounts) != 0 {
		t.Errorf("rendered %d secrets, %d PDBs, %d service accounts; want none", len(r.secrets), len(r.pdbs), len(r.serviceAccounts))
	}
	c := container(t, r.deployments["sm-schedulemaster-master"])
	if c.Image != "registry.example.org/schedulemaster:1.2.3" {
		t.Errorf("image %s", c.Image)
	}
	if db := envOf(c, "SM_DB"); db.ValueFrom.SecretKeyRef.Key != "dsn" {
		t.Errorf("SM_DB key %s", db.ValueFrom.SecretKeyRef.Key)
	}
	if k := envOf(c, "SM_CLUSTER_KEY"); k.ValueFrom.SecretKeyRef.Key != "key" {
		t.Errorf("SM_CLUSTER_KEY key %s", k.ValueFrom.SecretKeyRef.Key)
	}
	if sa := r.deployments["sm-schedulemaster-master"].Spec.Template.Spec.ServiceAccountName; sa != "default" {
		t.Errorf("service account %q", sa)
	}
}

// TestChartRefusesBadValues: what would break a cluster fails at render
// time with a sentence naming the value.
func TestChartRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, values, want string }{
		{"no secrets", ``, "secrets.clusterKey is required"},
		{"no DSN", `secrets: {clusterKey: chart-test-cluster-key-0123456789}`, "secrets.databaseDSN is required"},
		{"short key", `secrets: {clusterKey: short, databaseDSN: "mysql://a:b@tcp(h:3306)/d"}`, "16 characters"},
		{"grace under drain", minimalValues + `workers: {drainTimeoutSeconds: 60, terminationGracePeriodSeconds: 80}`, "must exceed workers.drainTimeoutSeconds + 25"},
		{"pool name", minimalValues + `workers: {pools: [{name: Billing_1}]}`, "must be a DNS label"},
		{"pool twice", minimalValues + `workers: {pools: [{name: a}, {name: a}]}`, `pool "a" is given twice`},
		{"pool label", minimalValues + `workers: {pools: [{name: a, labels: {pool: b}}]}`, "pool is set from the pool's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := renderChart(t, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestChartLint runs helm lint (the SDK's) with the minimal values: the
// chart file, values and templates.
func TestChartLint(t *testing.T) {
	t.Parallel()
	vals, err := chartutil.ReadValues([]byte(minimalValues))
	if err != nil {
		t.Fatal(err)
	}
	l := lint.All(chartDir(t), vals.AsMap(), "jobs", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		} else {
			t.Logf("helm lint: %s", m)
		}
	}
}
