package protocol

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Selector picks workers by their labels, with the set-based grammar of
// Kubernetes label selectors. Requirements are separated by commas and all
// must hold (AND):
//
//	k=v, k==v    the worker has label k with value v
//	k!=v         the worker has no label k, or its value is not v
//	k in (a,b)   the worker has label k with value a or b
//	k notin (a,b) the worker has no label k, or its value is neither a nor b
//	k            the worker has label k (any value, even empty)
//	!k           the worker has no label k
//
// As in Kubernetes, != and notin also match a worker that lacks the key:
// "zone!=eu" selects workers without a zone. Write "zone,zone!=eu" to
// select only workers that have a zone other than eu.
//
// Keys and values follow the label rules (see Labels); "k=" selects an empty
// value; values in a list are not empty. Spaces may stand between tokens.
// The zero Selector is empty and matches nothing.
type Selector struct {
	reqs []requirement // sorted: canonical order, no duplicates
}

// selOp is a requirement's operator; its order is the canonical order of
// requirements on one key.
type selOp uint8

const (
	opExists selOp = iota
	opNotExists
	opEquals
	opNotEquals
	opIn
	opNotIn
)

type requirement struct {
	key    string
	op     selOp
	values []string // sorted, unique; one for = and !=, none for exists
}

// SelectorError says where a selector is wrong. It matches ErrInvalid.
type SelectorError struct {
	// Pos is the 1-based character (rune) position in the input where the
	// problem is; one past the last character when the input ends too soon.
	Pos int
	// Msg says what is wrong there.
	Msg string

	input string
}

// Error reads `selector "k in a": at character 6: expected "(" after "in"`,
// with the input cut to 80 characters.
func (e *SelectorError) Error() string {
	return fmt.Sprintf("selector %s: at character %d: %s", strconv.Quote(truncate(e.input, 80)), e.Pos, e.Msg)
}

// Unwrap makes a SelectorError match ErrInvalid.
func (e *SelectorError) Unwrap() error { return ErrInvalid }

// ParseSelector parses a selector (see Selector for the grammar). "" or only
// spaces gives the empty selector. Every error is a *SelectorError: more
// than MaxSelectorLen bytes (as written, or in canonical form, so String
// always fits MaxSelectorLen), invalid UTF-8, NUL or other control
// characters (tabs and newlines too: only spaces separate tokens), more
// than MaxSelectorRequirements requirements, a key or value that breaks the
// label rules, or text that does not follow the grammar.
func ParseSelector(s string) (Selector, error) {
	if len(s) > MaxSelectorLen {
		return Selector{}, &SelectorError{Pos: runePos(s, MaxSelectorLen), Msg: fmt.Sprintf("longer than %d bytes", MaxSelectorLen), input: s}
	}
	pos := 1
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return Selector{}, &SelectorError{Pos: pos, Msg: "invalid UTF-8", input: s}
		case r == 0:
			return Selector{}, &SelectorError{Pos: pos, Msg: "NUL character", input: s}
		case unicode.IsControl(r):
			return Selector{}, &SelectorError{Pos: pos, Msg: fmt.Sprintf("control character %U (only spaces separate tokens)", r), input: s}
		}
		pos++
	}
	p := &selParser{input: s, src: []rune(s)}
	reqs, err := p.parse()
	if err != nil {
		return Selector{}, err
	}
	sel := Selector{reqs: canonical(reqs)}
	if n := len(sel.String()); n > MaxSelectorLen {
		// The canonical form adds a space before each list; it must fit
		// wherever the input did.
		return Selector{}, &SelectorError{Pos: 1, Msg: fmt.Sprintf("longer than %d bytes in canonical form (%d)", MaxSelectorLen, n), input: s}
	}
	return sel, nil
}

// Matches says whether labels l meet every requirement. An empty selector
// matches nothing, so a task without a selector selects no worker by label.
func (s Selector) Matches(l Labels) bool {
	if len(s.reqs) == 0 {
		return false
	}
	for _, r := range s.reqs {
		if !r.matches(l) {
			return false
		}
	}
	return true
}

// Empty says whether the selector has no requirement (it matches nothing).
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// String is the canonical form: requirements sorted by key, then operator
// (exists, !, =, !=, in, notin), then values; lists sorted without
// duplicates; "==" written "=", "in (v)" written "=v" and "notin (v)"
// written "!=v"; repeated requirements once. Equal selectors have equal
// strings, and ParseSelector reads the string back to the same selector.
func (s Selector) String() string {
	var b strings.Builder
	for i, r := range s.reqs {
		if i > 0 {
			b.WriteByte(',')
		}
		switch r.op {
		case opExists:
			b.WriteString(r.key)
		case opNotExists:
			b.WriteString("!" + r.key)
		case opEquals:
			b.WriteString(r.key + "=" + r.values[0])
		case opNotEquals:
			b.WriteString(r.key + "!=" + r.values[0])
		case opIn, opNotIn:
			b.WriteString(r.key)
			if r.op == opIn {
				b.WriteString(" in (")
			} else {
				b.WriteString(" notin (")
			}
			b.WriteString(strings.Join(r.values, ","))
			b.WriteByte(')')
		}
	}
	return b.String()
}

func (r requirement) matches(l Labels) bool {
	v, has := l[r.key]
	switch r.op {
	case opExists:
		return has
	case opNotExists:
		return !has
	case opEquals:
		return has && v == r.values[0]
	case opNotEquals:
		return !has || v != r.values[0]
	case opIn:
		return has && slices.Contains(r.values, v)
	case opNotIn:
		return !has || !slices.Contains(r.values, v)
	}
	return false
}

// canonical sorts requirements and their values, folds one-value lists
// into = and !=, and drops repeats.
func canonical(reqs []requirement) []requirement {
	for i := range reqs {
		r := &reqs[i]
		slices.Sort(r.values)
		r.values = slices.Compact(r.values)
		if len(r.values) == 1 && r.op == opIn {
			r.op = opEquals
		} else if len(r.values) == 1 && r.op == opNotIn {
			r.op = opNotEquals
		}
	}
	slices.SortFunc(reqs, func(a, b requirement) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.op, b.op), slices.Compare(a.values, b.values))
	})
	return slices.CompactFunc(reqs, func(a, b requirement) bool {
		return a.key == b.key && a.op == b.op && slices.Equal(a.values, b.values)
	})
}

// runePos is the 1-based rune position of byte offset off in s (invalid
// bytes count as one rune each).
func runePos(s string, off int) int {
	pos := 1
	for i := range s {
		if i >= off {
			break
		}
		pos++
	}
	return pos
}

// Tokens of the selector grammar.
type tokKind uint8

const (
	tokEnd tokKind = iota
	tokIdent
	tokNot    // !
	tokEq     // =
	tokDEq    // ==
	tokNeq    // !=
	tokLParen // (
	tokRParen // )
	tokComma  // ,
	tokBad    // < > (Kubernetes' numeric operators, not supported)
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based rune position
}

// selParser is a recursive-descent parser over the runes of a selector
// already checked for bad characters.
type selParser struct {
	input string
	src   []rune
	i     int // next rune
	peek  *token
}

func (p *selParser) errAt(pos int, format string, args ...any) *SelectorError {
	return &SelectorError{Pos: pos, Msg: fmt.Sprintf(format, args...), input: p.input}
}

func isSelSpecial(r rune) bool {
	return r == ' ' || r == '!' || r == '=' || r == '(' || r == ')' || r == ',' || r == '<' || r == '>'
}

func (p *selParser) lex() token {
	for p.i < len(p.src) && p.src[p.i] == ' ' {
		p.i++
	}
	start := p.i
	pos := start + 1
	if p.i == len(p.src) {
		return token{kind: tokEnd, pos: pos}
	}
	two := func(next rune, one, both tokKind, s1, s2 string) token {
		if p.i+1 < len(p.src) && p.src[p.i+1] == next {
			p.i += 2
			return token{kind: both, text: s2, pos: pos}
		}
		p.i++
		return token{kind: one, text: s1, pos: pos}
	}
	switch r := p.src[p.i]; r {
	case '!':
		return two('=', tokNot, tokNeq, "!", "!=")
	case '=':
		return two('=', tokEq, tokDEq, "=", "==")
	case '(':
		p.i++
		return token{kind: tokLParen, text: "(", pos: pos}
	case ')':
		p.i++
		return token{kind: tokRParen, text: ")", pos: pos}
	case ',':
		p.i++
		return token{kind: tokComma, text: ",", pos: pos}
	case '<', '>':
		p.i++
		return token{kind: tokBad, text: string(r), pos: pos}
	}
	for p.i < len(p.src) && !isSelSpecial(p.src[p.i]) {
		p.i++
	}
	return token{kind: tokIdent, text: string(p.src[start:p.i]), pos: pos}
}

func (p *selParser) next() token {
	if p.peek != nil {
		t := *p.peek
		p.peek = nil
		return t
	}
	return p.lex()
}

func (p *selParser) look() token {
	if p.peek == nil {
		t := p.lex()
		p.peek = &t
	}
	return *p.peek
}

// describe names a token in an error message.
func describe(t token) string {
	if t.kind == tokEnd {
		return "the end"
	}
	return strconv.Quote(truncate(t.text, 40))
}

func (p *selParser) parse() ([]requirement, error) {
	if p.look().kind == tokEnd {
		return nil, nil
	}
	var reqs []requirement
	for {
		t := p.look()
		if len(reqs) == MaxSelectorRequirements {
			return nil, p.errAt(t.pos, "more than %d requirements", MaxSelectorRequirements)
		}
		r, err := p.requirement()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
		switch t := p.next(); t.kind {
		case tokEnd:
			return reqs, nil
		case tokComma:
		default:
			return nil, p.errAt(t.pos, `expected "," or the end after a requirement, found %s`, describe(t))
		}
	}
}

func (p *selParser) key() (string, error) {
	t := p.next()
	if t.kind != tokIdent {
		return "", p.errAt(t.pos, "expected a key, found %s", describe(t))
	}
	if msg := checkLabelKey(t.text); msg != "" {
		return "", p.errAt(t.pos, "%s: %s", describe(t), msg)
	}
	return t.text, nil
}

func (p *selParser) value(t token) (string, error) {
	if msg := checkLabelValue(t.text); msg != "" {
		return "", p.errAt(t.pos, "%s: %s", describe(t), msg)
	}
	return t.text, nil
}

func (p *selParser) requirement() (requirement, error) {
	if p.look().kind == tokNot {
		p.next()
		k, err := p.key()
		if err != nil {
			return requirement{}, err
		}
		return requirement{key: k, op: opNotExists}, nil
	}
	k, err := p.key()
	if err != nil {
		return requirement{}, err
	}
	t := p.look()
	switch {
	case t.kind == tokEnd || t.kind == tokComma:
		return requirement{key: k, op: opExists}, nil
	case t.kind == tokEq || t.kind == tokDEq || t.kind == tokNeq:
		p.next()
		op := opEquals
		if t.kind == tokNeq {
			op = opNotEquals
		}
		v := ""
		switch vt := p.look(); vt.kind {
		case tokEnd, tokComma: // k= selects an empty value
		case tokIdent:
			p.next()
			if v, err = p.value(vt); err != nil {
				return requirement{}, err
			}
		default:
			return requirement{}, p.errAt(vt.pos, "expected a value after %q, found %s", t.text, describe(vt))
		}
		return requirement{key: k, op: op, values: []string{v}}, nil
	case t.kind == tokIdent && (t.text == "in" || t.text == "notin"):
		p.next()
		op := opIn
		if t.text == "notin" {
			op = opNotIn
		}
		vals, err := p.list(t.text)
		if err != nil {
			return requirement{}, err
		}
		return requirement{key: k, op: op, values: vals}, nil
	case t.kind == tokBad:
		return requirement{}, p.errAt(t.pos, `operator %q is not supported (use =, ==, !=, in or notin)`, t.text)
	}
	return requirement{}, p.errAt(t.pos, `expected "=", "==", "!=", "in", "notin", "," or the end after key %q, found %s`, k, describe(t))
}

// list parses "(a,b)" after in or notin: one or more non-empty values.
func (p *selParser) list(op string) ([]string, error) {
	if t := p.next(); t.kind != tokLParen {
		return nil, p.errAt(t.pos, `expected "(" after %q, found %s`, op, describe(t))
	}
	var vals []string
	for {
		t := p.next()
		if t.kind != tokIdent {
			return nil, p.errAt(t.pos, "expected a value in the list, found %s (values in a list are not empty)", describe(t))
		}
		v, err := p.value(t)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		switch t := p.next(); t.kind {
		case tokRParen:
			return vals, nil
		case tokComma:
		default:
			return nil, p.errAt(t.pos, `expected "," or ")" in the list, found %s`, describe(t))
		}
	}
}

// Implies reports whether every label set s matches is matched by a too:
// each of a's requirements is implied by one of s's on the same key (a
// syntactic check, sound but not complete: "zone in (a,b),zone!=b" is not
// seen to imply "zone=a"). It decides whether a task's selector stays
// within a pool a project was allowed. The empty s matches nothing, so it
// implies every a.
func (s Selector) Implies(a Selector) bool {
	if s.Empty() {
		return true
	}
	for _, ra := range a.reqs {
		if !slices.ContainsFunc(s.reqs, func(rs requirement) bool { return rs.key == ra.key && rs.implies(ra) }) {
			return false
		}
	}
	return true
}

// implies reports whether every label set matching r (on the same key) matches ra.
func (r requirement) implies(ra requirement) bool {
	positive := func() []string { // the values r allows, nil when it allows any
		if r.op == opEquals || r.op == opIn {
			return r.values
		}
		return nil
	}
	subset := func(vs, of []string) bool {
		for _, v := range vs {
			if !slices.Contains(of, v) {
				return false
			}
		}
		return true
	}
	switch ra.op {
	case opExists:
		return r.op == opExists || r.op == opEquals || r.op == opIn
	case opNotExists:
		return r.op == opNotExists
	case opEquals, opIn:
		vs := positive()
		return vs != nil && subset(vs, ra.values)
	case opNotEquals, opNotIn:
		if r.op == opNotExists {
			return true
		}
		if vs := positive(); vs != nil {
			return !slices.ContainsFunc(vs, func(v string) bool { return slices.Contains(ra.values, v) })
		}
		return (r.op == opNotEquals || r.op == opNotIn) && subset(ra.values, r.values)
	}
	return false
}
