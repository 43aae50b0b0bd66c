package protocol

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Labels are a worker's key=value labels, such as pool=billing, by which a
// task selects its executors (see Selector).
//
// A key is an optional prefix and a name, as in Kubernetes: "zone" or
// "example.com/zone". The name is 1-63 ASCII letters, digits, '-', '_' and
// '.', starting and ending with a letter or digit; the prefix, when there is
// one, is a DNS subdomain (lowercase letters, digits, '-' and '.', each
// dot-separated part starting and ending with a letter or digit) followed by
// '/'. The whole key, prefix included, is at most MaxLabelKeyLen characters
// (stricter than Kubernetes, so a key always fits one short column). A value
// is empty or follows the name rule, at most MaxLabelValueLen characters.
// Keys and values are case-sensitive.
type Labels map[string]string

// Bounds on labels and selectors.
const (
	// MaxLabels is how many labels one worker carries.
	MaxLabels = 16
	// MaxLabelKeyLen bounds a whole key, prefix and '/' included.
	MaxLabelKeyLen = 63
	// MaxLabelValueLen bounds a value.
	MaxLabelValueLen = 63
	// MaxSelectorLen bounds a selector's text, in bytes.
	MaxSelectorLen = 1024
	// MaxSelectorRequirements is how many comma-separated requirements a
	// selector holds.
	MaxSelectorRequirements = 16
)

// maxLabelsText bounds ParseLabels' input before it splits anything: every
// label at its longest, with its '=' and ',', and a little room for spaces.
const maxLabelsText = MaxLabels*(MaxLabelKeyLen+MaxLabelValueLen+2) + 256

// LabelError says what is wrong with one label; it matches ErrInvalid.
type LabelError struct {
	// Label is the label as written ("zone=eu 1"), or its key alone when
	// the key is what is wrong in a map.
	Label string
	// Msg says what is wrong.
	Msg string
}

// Error reads `label "zone=eu 1": value must be ...`.
func (e *LabelError) Error() string { return fmt.Sprintf("label %q: %s", e.Label, e.Msg) }

// Unwrap makes a LabelError match ErrInvalid.
func (e *LabelError) Unwrap() error { return ErrInvalid }

// ParseLabels parses "pool=billing,zone=eu-1". Spaces around each item are
// trimmed; "" (or only spaces) gives an empty, non-nil map. An item without
// '=', an empty item, a repeated key, a bad key or value, or more than
// MaxLabels labels is an error (*LabelError) naming the label.
func ParseLabels(s string) (Labels, error) {
	l := Labels{}
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	if len(s) > maxLabelsText {
		return nil, &LabelError{Label: truncate(s, 40), Msg: fmt.Sprintf("labels are longer than %d bytes", maxLabelsText)}
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, &LabelError{Label: truncate(item, 80), Msg: "empty label (two commas in a row, or a comma at an end)"}
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, &LabelError{Label: truncate(item, 80), Msg: "must be key=value (the value may be empty: key=)"}
		}
		if msg := checkLabelKey(k); msg != "" {
			return nil, &LabelError{Label: truncate(item, 80), Msg: msg}
		}
		if msg := checkLabelValue(v); msg != "" {
			return nil, &LabelError{Label: truncate(item, 80), Msg: msg}
		}
		if _, dup := l[k]; dup {
			return nil, &LabelError{Label: truncate(item, 80), Msg: fmt.Sprintf("key %q is given twice", k)}
		}
		if len(l) == MaxLabels {
			return nil, &LabelError{Label: truncate(item, 80), Msg: fmt.Sprintf("more than %d labels", MaxLabels)}
		}
		l[k] = v
	}
	return l, nil
}

// Validate applies ParseLabels' rules to a map (labels from JSON). A nil or
// empty map is valid. The first bad label in key order is reported.
func (l Labels) Validate() error {
	if len(l) > MaxLabels {
		return &LabelError{Label: truncate(l.String(), 40), Msg: fmt.Sprintf("%d labels, more than %d", len(l), MaxLabels)}
	}
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		if msg := checkLabelKey(k); msg != "" {
			return &LabelError{Label: truncate(k+"="+v, 80), Msg: msg}
		}
		if msg := checkLabelValue(v); msg != "" {
			return &LabelError{Label: truncate(k+"="+v, 80), Msg: msg}
		}
	}
	return nil
}

// String is the canonical form: "k=v,k=v" sorted by key ("" for none), what
// ParseLabels reads back.
func (l Labels) String() string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
	}
	return b.String()
}

// MergeLabels returns a new map with the worker's own labels and an admin's
// on top: an admin value wins, and an admin label with the value "" is still
// a label (set to empty, not removed). Neither argument is changed. The
// result is not validated: each side is at most MaxLabels, so together at
// most twice that.
func MergeLabels(worker, admin Labels) Labels {
	out := make(Labels, len(worker)+len(admin))
	maps.Copy(out, worker)
	maps.Copy(out, admin)
	return out
}

// checkLabelKey returns what is wrong with a key, or "".
func checkLabelKey(k string) string {
	switch {
	case k == "":
		return "key is empty"
	case len(k) > MaxLabelKeyLen:
		return fmt.Sprintf("key is longer than %d characters", MaxLabelKeyLen)
	}
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	} else if !isDNSSubdomain(prefix) {
		return fmt.Sprintf("key prefix %q must be a DNS subdomain (lowercase letters, digits, '-' and '.', e.g. example.com) followed by '/'", prefix)
	}
	if !isLabelName(name) {
		what := "key"
		if hasPrefix {
			what = "key name after the prefix"
		}
		return what + " must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	}
	return ""
}

// checkLabelValue returns what is wrong with a value, or "".
func checkLabelValue(v string) string {
	switch {
	case v == "":
		return ""
	case len(v) > MaxLabelValueLen:
		return fmt.Sprintf("value is longer than %d characters", MaxLabelValueLen)
	case !isLabelName(v):
		return "value must be empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	}
	return ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isLabelName: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?
func isLabelName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain: lowercase DNS labels [a-z0-9]([-a-z0-9]*[a-z0-9])? joined by '.'.
func isDNSSubdomain(s string) bool {
	if s == "" {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// truncate cuts s to at most n runes (invalid bytes count as one), marking
// the cut with "...".
func truncate(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i] + "..."
		}
		count++
	}
	return s
}
