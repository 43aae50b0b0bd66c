package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// The names a field of cron takes besides numbers (three letters, any case),
// in the order of their values: months from 1, days of the week from 0.
const (
	monthNames = "jan feb mar apr may jun jul aug sep oct nov dec"
	dayNames   = "sun mon tue wed thu fri sat"
)

// nameValue is the value of name among names counted from first, if it is one.
func nameValue(names string, first int, name string) (int, bool) {
	for i, n := range strings.Fields(names) {
		if strings.EqualFold(n, name) {
			return first + i, true
		}
	}
	return 0, false
}

// isCronDescriptor: word is an @ shorthand the parser knows (besides @every).
func isCronDescriptor(word string) bool {
	switch strings.ToLower(word) {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly":
		return true
	}
	return false
}

// cronSentence says in plain words why the cron parser refused expr: which
// field and why ("minute 61 is outside 0-59"), how many fields it has, or
// that a shorthand is unknown. It reads the fields as the parser does (lists,
// ranges a-b, steps /n, *, ?, month and day names); "" means it found
// nothing wrong, and the parser's own words are all there is.
func cronSentence(expr string) string {
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "@") {
		word, _, _ := strings.Cut(trimmed, " ")
		switch {
		case word == "@every":
			return "@every needs a duration like 30s or 5m"
		case !isCronDescriptor(word):
			return fmt.Sprintf("%q is not a shorthand cron knows: use @yearly, @monthly, @weekly, @daily, @hourly or @every with a duration", word)
		}
		return ""
	}
	parts := strings.Fields(trimmed)
	var fields []cronField
	switch len(parts) {
	case 5:
		fields = cronFields5
	case 6:
		fields = cronFields6
	case 1:
		return "has 1 field; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds"
	default:
		return fmt.Sprintf("has %d fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds", len(parts))
	}
	for i, p := range parts {
		if s := cronFieldSentence(fields[i], p); s != "" {
			return s
		}
	}
	return ""
}

// cronFieldSentence is what is wrong with text as field f, or "".
func cronFieldSentence(f cronField, text string) string {
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			return fmt.Sprintf("%s has an empty item between commas", f.name)
		}
		if strings.Count(item, "/") > 1 {
			return fmt.Sprintf("%s %q has more than one \"/\"", f.name, item)
		}
		span, step, stepped := strings.Cut(item, "/")
		if stepped {
			if n, err := strconv.Atoi(step); err != nil || n < 1 {
				return fmt.Sprintf("%s step %q must be a whole number of at least 1", f.name, step)
			}
		}
		if span == "*" || span == "?" {
			continue
		}
		if strings.Count(span, "-") > 1 {
			return fmt.Sprintf("%s %q has more than one \"-\"", f.name, span)
		}
		a, b, ranged := strings.Cut(span, "-")
		if a == "" { // "-1": a sign, not a range
			a, ranged = span, false
		}
		lo, msg := cronValue(f, a)
		if msg != "" {
			return msg
		}
		if !ranged {
			continue
		}
		hi, msg := cronValue(f, b)
		if msg != "" {
			return msg
		}
		if lo > hi {
			return fmt.Sprintf("%s range %d-%d runs backwards", f.name, lo, hi)
		}
	}
	return ""
}

// cronValue reads one value of field f: a number in its range, or a name.
func cronValue(f cronField, s string) (int, string) {
	example := ""
	switch f.name {
	case "month":
		example = "jan"
		if v, ok := nameValue(monthNames, 1, s); ok {
			return v, ""
		}
	case "day of week":
		example = "mon"
		if v, ok := nameValue(dayNames, 0, s); ok {
			return v, ""
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || s == "" || s[0] == '+' || s[0] == '-' {
		if example != "" {
			return 0, fmt.Sprintf("%s %q is not a number or a name like %s", f.name, s, example)
		}
		return 0, fmt.Sprintf("%s %q is not a number", f.name, s)
	}
	if n < f.lo || n > f.hi {
		return 0, fmt.Sprintf("%s %d is outside %d-%d", f.name, n, f.lo, f.hi)
	}
	return n, ""
}
