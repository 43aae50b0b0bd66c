package master

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FieldChange is one field that differs between two versions of a task.
type FieldChange struct {
	// Field names it as the API does: "http.url", "params.region",
	// "schedule.cron", "executors".
	Field string `json:"field"`
	// From and To are its values, "" when absent; both empty for a secret.
	From string `json:"from"`
	To   string `json:"to"`
	// Secret says the field holds a secret: only that it changed is shown.
	Secret bool `json:"secret,omitempty"`
}

// Diff compares versions a and b of a task field by field, in the order of
// the definition. Secret params, secret headers and the password of a URL
// are shown as changed, never by value.
func (tk *Tasks) Diff(ctx context.Context, id string, a, b int) ([]FieldChange, error) {
	_, da, err := tk.version(ctx, id, a)
	if err != nil {
		return nil, err
	}
	_, db, err := tk.version(ctx, id, b)
	if err != nil {
		return nil, err
	}
	return diffDefs(da, db)
}

// diffDefs compares two definitions.
func diffDefs(a, b *VersionDef) ([]FieldChange, error) {
	fa, err := flattenDef(a)
	if err != nil {
		return nil, err
	}
	fb, err := flattenDef(b)
	if err != nil {
		return nil, err
	}
	secret := func(field string) bool {
		for _, d := range []*VersionDef{a, b} {
			if name, ok := strings.CutPrefix(field, "params."); ok && IsSecretParam(name, d.SecretParams) {
				return true
			}
			if name, ok := strings.CutPrefix(field, "http.headers."); ok && d.HTTP != nil && IsSecretHeader(name, d.HTTP.SecretHeaders) {
				return true
			}
		}
		return false
	}
	var out []FieldChange
	for _, f := range fieldOrder(fa, fb) {
		va, vb := fa[f], fb[f]
		if va == vb {
			continue
		}
		c := FieldChange{Field: f, From: va, To: vb}
		switch {
		case secret(f):
			c = FieldChange{Field: f, Secret: true}
		case f == "http.url":
			c.From, c.To = MaskURL(va), MaskURL(vb)
			if c.From == c.To {
				c = FieldChange{Field: "http.url password", Secret: true}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// flattenDef writes a definition as field → text: objects by dotted path,
// lists and scalars as their JSON text (strings bare).
func flattenDef(d *VersionDef) (map[string]string, error) {
	js, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case nil:
		case string:
			if t != "" {
				out[prefix] = t
			}
		case []any:
			if len(t) > 0 {
				b, _ := json.Marshal(t)
				out[prefix] = string(b)
			}
		default:
			s := fmt.Sprint(t)
			if s != "0" && s != "false" {
				out[prefix] = s
			}
		}
	}
	walk("", v)
	return out, nil
}

// diffOrder is where the fields a person looks for first come.
var diffOrder = []string{"title", "description", "key", "type", "schedule", "timezone", "start_at", "end_at", "http", "shell",
	"params", "secret_params", "timeout", "retries", "executors", "selector", "routing", "overlap", "misfire", "keepers", "children"}

// fieldOrder lists the fields of a and b: by diffOrder's group, then by name.
func fieldOrder(a, b map[string]string) []string {
	all := map[string]bool{}
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			all[k] = true
		}
	}
	rank := func(f string) int {
		head, _, _ := strings.Cut(f, ".")
		if i := slices.Index(diffOrder, head); i >= 0 {
			return i
		}
		return len(diffOrder)
	}
	keys := slices.Collect(maps.Keys(all))
	slices.SortFunc(keys, func(x, y string) int {
		if rx, ry := rank(x), rank(y); rx != ry {
			return rx - ry
		}
		return strings.Compare(x, y)
	})
	return keys
}
