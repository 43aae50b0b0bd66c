// Configuration as code: the document that holds the desired state of the
// tasks and workflows (Export writes it, Apply makes a master match it), how
// it is read from YAML or JSON, and its ${ENV:NAME} references.

package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Bounds of a document, checked before anything else reads it.
const (
	// MaxDocumentBytes bounds a document's text.
	MaxDocumentBytes = 8 << 20
	// MaxDocumentTasks bounds the tasks of one document (one apply).
	MaxDocumentTasks = 5000
	// MaxDocumentWorkflows bounds the workflows of one document.
	MaxDocumentWorkflows = 1000
	// maxDocumentNodes bounds the YAML nodes read, aliases counted each time
	// they are used, so a "billion laughs" of anchors stops early.
	maxDocumentNodes = 1_000_000
	// maxDocumentDepth bounds nesting; a task is 4 levels deep.
	maxDocumentDepth = 32
)

// DocumentVersion is the version of the document format Export writes and
// Apply reads.
const DocumentVersion = 1

// Task states a document may ask for.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateStopped = "stopped"
)

// Document is the desired state of a project's tasks and workflows and,
// optionally, of the cluster's settings.
type Document struct {
	Version int       `json:"version"`
	Tasks   []DocTask `json:"tasks"`
	// Workflows, when the document has the section (even empty), are the
	// project's workflows; nil (no section) leaves them alone, prune or
	// not, so a document written before workflows existed deletes none.
	Workflows []DocWorkflow `json:"workflows,omitempty"`
	// Settings, when present, are the cluster's settings the document sets
	// (the fields it names; the others keep their values): only a cluster
	// admin applies them.
	Settings *SettingsPatch `json:"settings,omitempty"`
	// DryRun and Prune are options of an apply request sent as part of its
	// body (POST /api/v1/apply); Export never writes them.
	DryRun bool `json:"dry_run,omitempty"`
	Prune  bool `json:"prune,omitempty"`
}

// DocTask is one task of a document: its definition without id, who
// executes it, its keepers, its children (by the key, or title, of other
// tasks of the document) and the state it should be in ("" keeps an
// existing task's state and creates a new one stopped).
type DocTask struct {
	protocol.TaskDef
	Executors []string `json:"executors,omitempty"`
	Selector  string   `json:"selector,omitempty"`
	Keepers   []string `json:"keepers,omitempty"`
	Children  []string `json:"children,omitempty"`
	State     string   `json:"state,omitempty"`
}

// DocWorkflow is one workflow of a document: its definition without id,
// each step naming its task by the task's key or, when it has none, its
// title (a task of the document or of the project).
type DocWorkflow struct {
	WorkflowDef
}

// ident is what a document task is matched by: its key, or its title.
func (t *DocTask) ident() string {
	if k := strings.TrimSpace(t.Key); k != "" {
		return k
	}
	return strings.TrimSpace(t.Title)
}

// docName names a document task in messages: tasks[3] “Nightly export”.
func docName(i int, t *DocTask) string {
	if t == nil {
		return entryName("tasks", i, "", "")
	}
	return entryName("tasks", i, t.Key, t.Title)
}

// docWorkflowName names a document workflow in messages:
// workflows[0] (key nightly-etl).
func docWorkflowName(i int, w *WorkflowDef) string {
	return entryName("workflows", i, w.Key, w.Title)
}

// entryName names the i-th entry of a section by its key, else its title.
func entryName(section string, i int, key, title string) string {
	s := fmt.Sprintf("%s[%d]", section, i)
	if k := strings.TrimSpace(key); k != "" {
		s += " (key " + clipText(k, 60) + ")"
	} else if tt := strings.TrimSpace(title); tt != "" {
		s += " “" + clipText(tt, 60) + "”"
	}
	return s
}

func clipText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// envRefName is the name of an environment variable a reference may name.
var envRefName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

const (
	envRefOpen   = "${ENV:"
	envRefEscape = "$${ENV:" // stands for the text ${ENV: itself
)

// EscapeEnvRefs writes s so that a document reader reads it back as it is:
// every ${ENV: in it becomes $${ENV:.
func EscapeEnvRefs(s string) string {
	return strings.ReplaceAll(s, envRefOpen, envRefEscape)
}

// expandRefs reads the references of one string value. With lookup nil a
// reference is an error (the master never fills references from its own
// environment: that would hand its secrets to whoever writes a document)
// and escapes are undone; with lookup set each reference becomes its
// variable's value, escaped, so the result is again a document's text.
// missing collects the names lookup does not know.
func expandRefs(s string, lookup func(string) (string, bool), missing map[string]bool) (string, error) {
	if !strings.Contains(s, envRefOpen) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], envRefEscape):
			if lookup == nil {
				b.WriteString(envRefOpen)
			} else {
				b.WriteString(envRefEscape)
			}
			i += len(envRefEscape)
		case strings.HasPrefix(s[i:], envRefOpen):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", errors.New("holds ${ENV: without its closing }")
			}
			name := s[i+len(envRefOpen) : i+end]
			if !envRefName.MatchString(name) {
				return "", fmt.Errorf("${ENV:%s}: %q is not an environment variable name (letters, digits and '_')", clipText(name, 40), clipText(name, 40))
			}
			if lookup == nil {
				return "", fmt.Errorf("${ENV:%s} is a reference to an environment variable: fill it in before sending (schedulemaster apply fills references from its own environment)", name)
			}
			v, ok := lookup(name)
			if !ok {
				missing[name] = true
			}
			b.WriteString(EscapeEnvRefs(v))
			i += end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// docReader turns a YAML (or JSON) node tree into plain values, bounded.
type docReader struct {
	nodes int
	// aliased counts the values read through aliases, against aliasBudget:
	// what a document may expand is proportional to its size.
	aliased, aliasBudget, inAlias int
	lookup                        func(string) (string, bool)
	missing                       map[string]bool
	// rewrite, with lookup set, writes each filled value back into the tree.
	rewrite bool
	// secret, when set, says whether a value at path (its text raw) may
	// hold references: only secret fields may (see FillDocument).
	secret func(path, raw string) bool
}

type docError struct {
	path string
	msg  string
}

func (e *docError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// value converts n into nil, bool, json.Number, string, []any or
// map[string]any.
func (r *docReader) value(n *yaml.Node, path string, depth int) (any, error) {
	r.nodes++
	if r.nodes > maxDocumentNodes {
		return nil, &docError{path, fmt.Sprintf("the document has more than %d values (aliases counted each time they are used)", maxDocumentNodes)}
	}
	if r.inAlias > 0 {
		if r.aliased++; r.aliased > r.aliasBudget {
			return nil, &docError{path, fmt.Sprintf("its aliases expand to more than %d values, more than a document of this size may (aliases counted each time they are used)", r.aliasBudget)}
		}
	}
	if depth > maxDocumentDepth {
		return nil, &docError{path, fmt.Sprintf("nested more than %d levels deep", maxDocumentDepth)}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return r.value(n.Content[0], path, depth)
	case yaml.AliasNode:
		r.inAlias++
		defer func() { r.inAlias-- }()
		return r.value(n.Alias, path, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := r.value(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		if err := r.mapping(n, path, depth, out, map[string]bool{}); err != nil {
			return nil, err
		}
		return out, nil
	case yaml.ScalarNode:
		return r.scalar(n, path)
	}
	return nil, &docError{path, "is not a value"}
}

// mapping adds n's keys to out; "<<" merges other mappings in, their keys
// giving way to those written out.
func (r *docReader) mapping(n *yaml.Node, path string, depth int, out map[string]any, own map[string]bool) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.ShortTag() != "!!str") {
			return &docError{path, fmt.Sprintf("line %d: a key must be text", k.Line)}
		}
		key := k.Value
		if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
			return &docError{path, "a key holds a NUL byte or invalid UTF-8"}
		}
		sub := joinPath(path, key)
		if own[key] {
			return &docError{sub, fmt.Sprintf("line %d: given twice", k.Line)}
		}
		own[key] = true
		val, err := r.value(v, sub, depth+1)
		if err != nil {
			return err
		}
		out[key] = val
	}
	for _, m := range merges {
		r.nodes++
		src := m
		if src.Kind == yaml.AliasNode {
			src = src.Alias
		}
		var list []*yaml.Node
		switch src.Kind {
		case yaml.MappingNode:
			list = []*yaml.Node{src}
		case yaml.SequenceNode:
			for _, c := range src.Content {
				if c.Kind == yaml.AliasNode {
					c = c.Alias
				}
				list = append(list, c)
			}
		}
		for _, mm := range list {
			if mm.Kind != yaml.MappingNode {
				return &docError{path, "<< must merge a mapping or a list of mappings"}
			}
			merged := map[string]any{}
			// A merge reads its mapping again: counted as an alias.
			r.inAlias++
			err := r.mapping(mm, path, depth+1, merged, map[string]bool{})
			r.inAlias--
			if err != nil {
				return err
			}
			for k, v := range merged {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return nil
}

func joinPath(path, key string) string {
	key = clipText(key, 60)
	if path == "" {
		return key
	}
	return path + "." + key
}

func (r *docReader) scalar(n *yaml.Node, path string) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, &docError{path, fmt.Sprintf("%q is not true or false", clipText(n.Value, 40))}
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, &docError{path, fmt.Sprintf("%q is not a whole number that fits", clipText(n.Value, 40))}
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || f != f || f > 1e300 || f < -1e300 {
			return nil, &docError{path, fmt.Sprintf("%q is not a finite number", clipText(n.Value, 40))}
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "!!str", "!!timestamp":
		s := n.Value
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			return nil, &docError{path, "holds a NUL byte or invalid UTF-8"}
		}
		lookup, refs := r.lookup, 0
		if lookup != nil {
			lookup = func(name string) (string, bool) { refs++; return r.lookup(name) }
		}
		out, err := expandRefs(s, lookup, r.missing)
		if err != nil {
			return nil, &docError{path, err.Error()}
		}
		if refs > 0 && r.secret != nil && !r.secret(path, s) {
			return nil, &docError{path, "holds ${ENV:…}, which is filled only in secret fields (a secret header, a secret param, a URL's password), where no viewer reads it"}
		}
		if r.rewrite && out != s {
			n.Value, n.Tag, n.Style = out, "!!str", yaml.DoubleQuotedStyle
		}
		return out, nil
	}
	return nil, &docError{path, fmt.Sprintf("the tag %s is not accepted", clipText(n.Tag, 40))}
}

// aliasBudget is how many values a document of n bytes may read through
// aliases: a task's worth of defaults per task, about, and never a
// "billion laughs" whose expansion dwarfs its text.
func aliasBudget(n int) int { return 10_000 + n/4 }

// readTree checks a document's text and parses it into a node tree.
func readTree(data []byte) (*yaml.Node, error) {
	switch {
	case len(data) > MaxDocumentBytes:
		return nil, Errorf(KindTooLarge, "the document is larger than %d MiB", MaxDocumentBytes>>20)
	case !utf8.Valid(data):
		return nil, Errorf(KindInvalid, "the document is not valid UTF-8")
	case bytes.IndexByte(data, 0) >= 0:
		return nil, Errorf(KindInvalid, "the document holds a NUL byte")
	case len(bytes.TrimSpace(data)) == 0:
		return nil, Errorf(KindInvalid, "the document is empty")
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, Errorf(KindInvalid, "the document is not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, Errorf(KindInvalid, "the file holds more than one YAML document (---): put every task in one")
	}
	return &root, nil
}

// ParseDocument reads a document (YAML, or JSON, which is YAML too). A
// ${ENV:NAME} reference left in it is an error naming where it is: the
// master never reads its own environment for a document; $${ENV: stands for
// the text ${ENV:. Unknown fields, a task with an id, repeated keys and values of
// the wrong type are errors naming the task and field.
func ParseDocument(data []byte) (*Document, error) {
	root, err := readTree(data)
	if err != nil {
		return nil, err
	}
	r := &docReader{aliasBudget: aliasBudget(len(data))}
	v, err := r.value(root, "", 0)
	if err != nil {
		return nil, Errorf(KindInvalid, "%s", err.Error())
	}
	return decodeDocument(v)
}

// FillDocument fills the ${ENV:NAME} references of a document's text and
// returns the text to send to a master, as YAML. Only the variables named
// (the operator's --env) are filled, from lookup, and only in secret fields
// (secret headers and params, a URL's password), which viewers see masked:
// a reference elsewhere, or to a variable not named, is an error, and the
// master's own SM_* variables (SM_TOKEN) can never be named. Every name
// lookup does not know is an error, all named at once, so nothing is sent
// with a hole in it. The filled values are escaped: a value holding ${ENV:
// stays text.
func FillDocument(data []byte, names []string, lookup func(string) (string, bool)) ([]byte, error) {
	allowed := map[string]bool{}
	for _, n := range names {
		switch {
		case !envRefName.MatchString(n):
			return nil, Errorf(KindInvalid, "--env %q is not an environment variable name (letters, digits and '_')", clipText(n, 40))
		case strings.HasPrefix(strings.ToUpper(n), "SM_"):
			return nil, Errorf(KindInvalid, "--env %s: the SM_* variables configure schedulemaster itself (SM_TOKEN is your API token) and are never filled into a document", n)
		}
		allowed[n] = true
	}
	root, err := readTree(data)
	if err != nil {
		return nil, err
	}
	// First the plain values, references left empty, to learn which
	// fields are secret; then the fill, refused outside them.
	probe := &docReader{lookup: func(string) (string, bool) { return "", true }, missing: map[string]bool{}, aliasBudget: aliasBudget(len(data))}
	v, err := probe.value(root, "", 0)
	if err != nil {
		return nil, Errorf(KindInvalid, "%s", err.Error())
	}
	unnamed := map[string]bool{}
	r := &docReader{missing: map[string]bool{}, rewrite: true, secret: secretPaths(v), aliasBudget: aliasBudget(len(data)), lookup: func(name string) (string, bool) {
		if !allowed[name] {
			unnamed[name] = true
			return "", true
		}
		return lookup(name)
	}}
	if v, err = r.value(root, "", 0); err != nil {
		return nil, Errorf(KindInvalid, "%s", err.Error())
	}
	if len(unnamed) > 0 {
		list := sortedKeys(unnamed)
		return nil, Errorf(KindInvalid, "the document refers to %s, not named with --env: name each variable apply may fill (--env %s)",
			strings.Join(list, ", "), strings.Join(list, " --env "))
	}
	if len(r.missing) > 0 {
		return nil, Errorf(KindInvalid, "the environment has no %s: set %s before applying (the document refers to %s as ${ENV:NAME})",
			strings.Join(sortedKeys(r.missing), ", "), itThem(len(r.missing)), itThem(len(r.missing)))
	}
	if _, err := decodeDocument(v); err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("master: write the filled document: %w", err)
	}
	return out, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// secretPaths returns whether a value of the plain document v, at path and
// with text raw, is a secret field: a header IsSecretHeader names, a param
// of secret_params, the password of an http.url (every reference in the
// URL inside its password), the settings' SMTP password and the passwords of
// their URLs.
func secretPaths(v any) func(path, raw string) bool {
	secret := map[string]bool{}
	urls := map[string]bool{}
	root, _ := v.(map[string]any)
	if _, ok := root["settings"].(map[string]any); ok {
		secret[joinPath("settings", "smtp_password")] = true
		urls[joinPath("settings", "webhook_url")] = true
		urls[joinPath("settings", "public_url")] = true
	}
	tasks, _ := root["tasks"].([]any)
	for i, tv := range tasks {
		t, _ := tv.(map[string]any)
		at := fmt.Sprintf("tasks[%d]", i)
		marked := stringsOf(t["secret_params"])
		if params, ok := t["params"].(map[string]any); ok {
			for k := range params {
				if slices.Contains(marked, k) {
					secret[joinPath(joinPath(at, "params"), k)] = true
				}
			}
		}
		h, _ := t["http"].(map[string]any)
		if h == nil {
			continue
		}
		urls[joinPath(joinPath(at, "http"), "url")] = true
		marked = stringsOf(h["secret_headers"])
		if headers, ok := h["headers"].(map[string]any); ok {
			for k := range headers {
				if IsSecretHeader(k, marked) {
					secret[joinPath(joinPath(joinPath(at, "http"), "headers"), k)] = true
				}
			}
		}
	}
	return func(path, raw string) bool {
		return secret[path] || (urls[path] && refsInPassword(raw))
	}
}

func stringsOf(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// refsInPassword reports whether every ${ENV: reference of a URL's text
// lies in its password (scheme://user:PASSWORD@host/...).
func refsInPassword(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		return false
	}
	start := i + 3
	end := len(raw)
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		end = start + j
	}
	at := strings.LastIndex(raw[start:end], "@")
	if at < 0 {
		return false
	}
	colon := strings.Index(raw[start:start+at], ":")
	if colon < 0 {
		return false
	}
	lo, hi := start+colon+1, start+at
	text := strings.ReplaceAll(raw, envRefEscape, strings.Repeat("_", len(envRefEscape)))
	for k := 0; ; {
		n := strings.Index(text[k:], envRefOpen)
		if n < 0 {
			return true
		}
		n += k
		e := strings.IndexByte(text[n:], '}')
		if n < lo || e < 0 || n+e >= hi {
			return false
		}
		k = n + e + 1
	}
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// decodeDocument decodes plain values into a Document, task by task, so an
// error names the task.
func decodeDocument(v any) (*Document, error) {
	top, ok := v.(map[string]any)
	if !ok {
		return nil, Errorf(KindInvalid, "the document must be a mapping with version, tasks and workflows")
	}
	doc := &Document{Version: DocumentVersion}
	for k, val := range top {
		switch k {
		case "version":
			n, ok := val.(json.Number)
			if !ok || n.String() != strconv.Itoa(DocumentVersion) {
				return nil, Errorf(KindInvalid, "version: this master reads version %d documents", DocumentVersion)
			}
		case "dry_run", "prune":
			b, ok := val.(bool)
			if !ok {
				return nil, Errorf(KindInvalid, "%s: must be true or false", k)
			}
			if k == "dry_run" {
				doc.DryRun = b
			} else {
				doc.Prune = b
			}
		case "tasks", "workflows":
		case "settings":
			p, err := decodeDocSettings(val)
			if err != nil {
				return nil, err
			}
			doc.Settings = p
		default:
			return nil, Errorf(KindInvalid, "%s: unknown field (a document has version, tasks, workflows and settings)", clipText(k, 60))
		}
	}
	var list []any
	switch t := top["tasks"].(type) {
	case nil:
	case []any:
		list = t
	default:
		return nil, Errorf(KindInvalid, "tasks: must be a list of tasks")
	}
	if len(list) > MaxDocumentTasks {
		return nil, Errorf(KindTooLarge, "the document holds %d tasks: at most %d in one apply", len(list), MaxDocumentTasks)
	}
	doc.Tasks = make([]DocTask, len(list))
	fe := protocol.FieldErrors{}
	for i, raw := range list {
		m, ok := raw.(map[string]any)
		if !ok {
			fe[fmt.Sprintf("tasks[%d]", i)] = "must be a mapping of a task's fields"
			continue
		}
		if _, has := m["id"]; has {
			fe[fmt.Sprintf("tasks[%d].id", i)] = "a document carries no ids: tasks are matched by key, or by title"
			continue
		}
		js, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("master: document: %w", err)
		}
		var t DocTask
		if err := protocol.DecodeStrict(js, &t); err != nil {
			fe[docName(i, probeName(m))] = jsonMessage(err)
			continue
		}
		doc.Tasks[i] = t
	}
	wfs, err := decodeDocWorkflows(top["workflows"], fe)
	if err != nil {
		return nil, err
	}
	doc.Workflows = wfs
	if len(fe) > 0 {
		return nil, documentInvalid(fe)
	}
	return doc, nil
}

// decodeDocWorkflows reads a document's workflows section, workflow by
// workflow, problems into fe; nil when the document has none.
func decodeDocWorkflows(v any, fe protocol.FieldErrors) ([]DocWorkflow, error) {
	var list []any
	switch t := v.(type) {
	case nil:
		return nil, nil // no section (or "workflows:" left empty, which reads the same)
	case []any:
		list = t
	default:
		return nil, Errorf(KindInvalid, "workflows: must be a list of workflows")
	}
	if len(list) > MaxDocumentWorkflows {
		return nil, Errorf(KindTooLarge, "the document holds %d workflows: at most %d in one apply", len(list), MaxDocumentWorkflows)
	}
	out := make([]DocWorkflow, len(list))
	for i, raw := range list {
		m, ok := raw.(map[string]any)
		if !ok {
			fe[fmt.Sprintf("workflows[%d]", i)] = "must be a mapping of a workflow's fields"
			continue
		}
		if _, has := m["id"]; has {
			fe[fmt.Sprintf("workflows[%d].id", i)] = "a document carries no ids: workflows are matched by key, or by title"
			continue
		}
		js, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("master: document: %w", err)
		}
		if err := protocol.DecodeStrict(js, &out[i]); err != nil {
			p := probeName(m)
			fe[entryName("workflows", i, p.Key, p.Title)] = jsonMessage(err)
		}
	}
	return out, nil
}

// decodeDocSettings reads a document's settings section: the fields of
// PATCH /api/v1/settings, nothing else.
func decodeDocSettings(v any) (*SettingsPatch, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Errorf(KindInvalid, "settings: must be a mapping of settings (the fields of PATCH /api/v1/settings)")
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("master: document settings: %w", err)
	}
	var p SettingsPatch
	if err := protocol.DecodeStrict(js, &p); err != nil {
		return nil, documentInvalid(protocol.FieldErrors{"settings": jsonMessage(err)})
	}
	return &p, nil
}

// probeName is a task's key and title, read from its raw fields for messages.
func probeName(m map[string]any) *DocTask {
	t := &DocTask{}
	t.Key, _ = m["key"].(string)
	t.Title, _ = m["title"].(string)
	return t
}

// jsonMessage words a decoding error of encoding/json for people.
func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "a field"
		}
		return fmt.Sprintf("%s: %s cannot be %s", field, te.Value, te.Type.String())
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// documentInvalid is the refusal of a document: every problem, by object
// and field, in the sentence and in Fields.
func documentInvalid(fe protocol.FieldErrors) error {
	const shown = 10
	keys := make([]string, 0, len(fe))
	for k := range fe {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for i, k := range keys {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-shown))
			break
		}
		parts = append(parts, k+": "+fe[k])
	}
	return &Error{Kind: KindInvalid, Msg: "the document was not applied, nothing changed: " + strings.Join(parts, "; "), Fields: fe}
}
