package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// exportPage is how many tasks Export reads at a time.
const exportPage = 500

// allTasks reads every task that is not deleted, page by page.
// projects limits them (nil: every project).
func (tk *Tasks) allTasks(ctx context.Context, projects []int64) ([]*Task, error) {
	var out []*Task
	seen := map[string]bool{}
	for offset := 0; ; offset += exportPage {
		rows, _, err := store.ListTasks(ctx, tk.m.st.DB, store.TaskFilter{Projects: projects, Limit: exportPage, Offset: offset})
		if err != nil {
			return nil, err
		}
		for i := range rows {
			if seen[rows[i].ID] {
				continue // a task created meanwhile moved the pages by one
			}
			seen[rows[i].ID] = true
			t, err := decodeTask(&rows[i])
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		if len(rows) < exportPage {
			return out, nil
		}
	}
}

// envSentinel marks where a reference goes until the YAML is written: a NUL
// cannot be in a stored value, so it cannot be mistaken for one.
func envSentinel(name string) string { return "\x00ENV:" + name + "\x00" }

var sentinelRE = regexp.MustCompile("\x00ENV:([A-Za-z0-9_]+)\x00")

// Export writes the desired state of every task that is not deleted as a
// YAML document that Apply reads back: definitions without ids, executors,
// selector, keepers, children by key (or title), and state; no timestamps,
// counters or results. Secret params, secret headers and URL passwords are
// ${ENV:NAME} references, never values; the header comment names every
// variable. Tasks are in the order of their key (or title), so the same
// tasks export to the same text. The workflows follow, in the same order,
// without ids, each step naming its task by key (or title).
//
// It exports one project's tasks and workflows ("": the default project) and, with
// opts.Settings, the cluster's settings (cluster admins only): every stored
// setting, the SMTP password and URL passwords as references too.
func (m *Master) Export(ctx context.Context, opts ExportOptions) ([]byte, error) {
	var settings Settings
	if opts.Settings {
		if err := requireClusterAdmin(ctx); err != nil {
			return nil, Errorf(KindForbidden, "forbidden: only a cluster admin exports the cluster's settings (leave settings out)")
		}
		var err error
		if settings, err = m.StoredSettings(ctx); err != nil {
			return nil, err
		}
	}
	p, err := m.projects.Get(ctx, strings.TrimSpace(opts.Project))
	if err != nil {
		return nil, err
	}
	tasks, err := m.tasks.allTasks(ctx, []int64{p.ID})
	if err != nil {
		return nil, err
	}
	ident := func(t *Task) string {
		if t.Key != "" {
			return t.Key
		}
		return t.Title
	}
	slices.SortStableFunc(tasks, func(a, b *Task) int {
		if c := strings.Compare(ident(a), ident(b)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	byID := map[string]*Task{}
	count := map[string]int{}
	for _, t := range tasks {
		byID[t.ID] = t
		count[ident(t)]++
	}
	env := &envNames{used: map[string]bool{}}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, t := range tasks {
		notes := []string{fmt.Sprintf("version %d", t.Version)}
		d := DocTask{TaskDef: t.TaskDef, Executors: t.Executors, Selector: t.Selector, Keepers: t.Keepers, State: t.Status.String()}
		d.ID = ""
		for _, c := range t.Children {
			if ct, ok := byID[c]; ok {
				d.Children = append(d.Children, ident(ct))
			} else {
				notes = append(notes, fmt.Sprintf("child task %s no longer exists: it is left out", c))
			}
		}
		if count[ident(t)] > 1 {
			notes = append(notes, fmt.Sprintf("%d tasks have this %s: give each its own key before applying", count[ident(t)], map[bool]string{true: "key", false: "title"}[t.Key != ""]))
		}
		env.hide(&d.TaskDef, ident(t))
		node, err := exportTaskNode(&d)
		if err != nil {
			return nil, fmt.Errorf("master: export task %s: %w", t.ID, err)
		}
		node.HeadComment = strings.Join(notes, "\n")
		seq.Content = append(seq.Content, node)
	}
	workflows, err := m.workflows.projectWorkflows(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	wseq, err := workflowsNode(workflows, byID, ident, count)
	if err != nil {
		return nil, err
	}
	var sets *yaml.Node
	if opts.Settings {
		if sets, err = settingsNode(settings, env); err != nil {
			return nil, fmt.Errorf("master: export settings: %w", err)
		}
	}
	head := []string{
		"ScheduleMaster tasks and workflows: the desired state, as GET /api/v1/export writes it.",
		"Apply: SM_TOKEN=<API token> schedulemaster apply -f FILE --master URL [--dry-run] [--prune]",
		"Tasks and workflows are matched by key, or by title when they have none; a step names its task so too.",
		"Each task's and workflow's comment names its version when exported (see its history); apply does not read it.",
	}
	if sets != nil {
		head = append(head, "The settings are the cluster's: only a cluster admin applies them; a field left out keeps its value.")
	}
	if len(env.list) > 0 {
		head = append(head, "Secrets are not written here: apply fills each ${ENV:NAME} from its environment.",
			"Environment needed: "+strings.Join(env.list, ", "))
	}
	if len(tasks) > MaxDocumentTasks {
		head = append(head, fmt.Sprintf("%d tasks: more than one apply takes (%d).", len(tasks), MaxDocumentTasks))
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", HeadComment: strings.Join(head, "\n"), Content: []*yaml.Node{
		strNode("version"), {Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(DocumentVersion)},
	}}
	if sets != nil {
		root.Content = append(root.Content, strNode("settings"), sets)
	}
	root.Content = append(root.Content, strNode("tasks"), seq)
	if len(seq.Content) == 0 {
		seq.Style = yaml.FlowStyle
	}
	// Always written, [] when there are none: a section, even empty, says
	// the document holds the project's workflows (prune then deletes the others).
	root.Content = append(root.Content, strNode("workflows"), wseq)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("master: export: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("master: export: %w", err)
	}
	return buf.Bytes(), nil
}

// ExportOptions says what Export writes.
type ExportOptions struct {
	// Project is the project whose tasks and workflows are written ("":
	// default).
	Project string
	// Settings adds the cluster's settings (cluster admins only).
	Settings bool
}

// settingsNode writes the stored settings as a document's settings
// section: every field, false and empty ones too (absent would mean "keep"),
// in the order of PATCH /api/v1/settings, secrets as references.
func settingsNode(st Settings, env *envNames) (*yaml.Node, error) {
	p := SettingsPatchOf(st)
	if st.SMTPPassword != "" {
		ref := env.name("SETTINGS", "SMTP_PASSWORD")
		p.SMTPPassword = &ref
	}
	for _, u := range []*string{p.WebhookURL, p.PublicURL} {
		if start, end, ok := urlPassword(*u); ok {
			part := "WEBHOOK_URL_PASSWORD"
			if u == p.PublicURL {
				part = "PUBLIC_URL_PASSWORD"
			}
			*u = (*u)[:start] + env.name("SETTINGS", part) + (*u)[end:]
		}
	}
	js, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, k := range jsonFieldOrder(p) {
		if val, ok := v[k]; ok {
			n.Content = append(n.Content, strNode(k), valueNode(val, ""))
		}
	}
	return n, nil
}

// envNames hands out the variable names of a task's secrets:
// TASK_PARAM_NAME, TASK_HEADER_NAME, TASK_URL_PASSWORD, TASK from the task's
// key or title, each name once in a document.
type envNames struct {
	used map[string]bool
	list []string // in order of use, for the header
}

func envWord(s string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
		} else if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.TrimRight(b.String(), "_")
}

func (e *envNames) name(task, part string) string {
	base := envWord(task)
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "_")
	}
	if base == "" || (base[0] >= '0' && base[0] <= '9') {
		base = strings.TrimRight("TASK_"+base, "_")
	}
	n := base + "_" + part
	for i := 2; e.used[n]; i++ {
		n = fmt.Sprintf("%s_%s_%d", base, part, i)
	}
	e.used[n] = true
	e.list = append(e.list, n)
	return envSentinel(n)
}

// hide replaces d's secrets, as MaskTaskDef finds them, by references.
func (e *envNames) hide(d *protocol.TaskDef, task string) {
	if len(d.Params) > 0 {
		d.Params = maps.Clone(d.Params)
		for _, k := range slices.Sorted(maps.Keys(d.Params)) {
			if d.Params[k] != "" && IsSecretParam(k, d.SecretParams) {
				d.Params[k] = e.name(task, "PARAM_"+envWord(k))
			}
		}
	}
	if d.HTTP == nil {
		return
	}
	h := *d.HTTP
	if len(h.Headers) > 0 {
		h.Headers = maps.Clone(h.Headers)
		for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
			if h.Headers[k] != "" && IsSecretHeader(k, h.SecretHeaders) {
				h.Headers[k] = e.name(task, "HEADER_"+envWord(k))
			}
		}
	}
	if start, end, ok := urlPassword(h.URL); ok {
		h.URL = h.URL[:start] + e.name(task, "URL_PASSWORD") + h.URL[end:]
	}
	d.HTTP = &h
}

// urlPassword finds the password of a user:password@ URL as written (still
// percent-encoded), so a reference filled with the same text gives back the
// same URL.
func urlPassword(raw string) (start, end int, ok bool) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return 0, 0, false
	}
	auth := raw[i+3:]
	if j := strings.IndexAny(auth, "/?#"); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 || colon+1 == at {
		return 0, 0, false
	}
	return i + 3 + colon + 1, i + 3 + at, true
}

// Field order of the exported objects: what people look for first.
var exportOrder = map[string][]string{
	"task": {"key", "title", "description", "state", "type", "schedule", "timezone", "start_at", "end_at", "http", "shell",
		"params", "secret_params", "timeout", "retries", "executors", "selector", "routing", "routing_key", "overlap",
		"misfire", "at_capacity", "keepers", "children"},
	"schedule": {"kind", "cron", "every", "align", "at"},
	"http":     {"method", "url", "headers", "secret_headers", "content_type", "body"},
	"shell":    {"command", "args", "env", "dir"},
	"workflow": {"key", "title", "schedule", "timezone", "start_at", "end_at", "overlap", "misfire", "timeout", "params", "steps"},
	"step":     {"name", "task", "params", "timeout", "after"},
	"edge":     {"step", "on"},
}

// exportElems names the object kind of a list's elements, by the list's
// field: a workflow's steps and a step's edges.
var exportElems = map[string]string{"steps": "step", "after": "edge"}

// exportTaskNode writes a task as a YAML mapping through its JSON form (one
// set of field names for JSON and YAML), in exportOrder, empty fields left
// out.
func exportTaskNode(d *DocTask) (*yaml.Node, error) {
	js, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return objectNode(v, "task"), nil
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// empty reports values an export leaves out: they mean the same as absent.
func empty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case bool:
		return !t
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// objectNode writes a struct's object: known fields in order, others after
// them by name, empty ones left out.
func objectNode(v map[string]any, kind string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	order := exportOrder[kind]
	rest := slices.Sorted(maps.Keys(v))
	keys := append([]string(nil), order...)
	for _, k := range rest {
		if !slices.Contains(order, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		val, ok := v[k]
		if !ok || empty(val) {
			continue
		}
		n.Content = append(n.Content, strNode(k), valueNode(val, k))
	}
	return n
}

// valueNode writes a value; maps of names to values (params, headers, env)
// keep their empty entries, which mean something.
func valueNode(v any, field string) *yaml.Node {
	switch t := v.(type) {
	case string:
		// The references go in after the stored text was escaped.
		return strNode(sentinelRE.ReplaceAllString(EscapeEnvRefs(t), "$${ENV:$1}"))
	case json.Number:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: t.String()}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t)}
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case []any:
		s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range t {
			s.Content = append(s.Content, valueNode(e, exportElems[field]))
		}
		if field == "after" {
			s.Style = yaml.FlowStyle // [{step: extract, on: success}]: a step's edges read on one line
		}
		return s
	case map[string]any:
		if _, ok := exportOrder[field]; ok {
			return objectNode(t, field)
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			m.Content = append(m.Content, strNode(k), valueNode(t[k], ""))
		}
		return m
	}
	return strNode(fmt.Sprint(v))
}
