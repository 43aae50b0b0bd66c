package sqltask

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Bounds of a result shown as a table.
const (
	// MaxRows is how many rows of a result the output shows.
	MaxRows = 100
	// MaxCell is how many characters of a value the table shows.
	MaxCell = 200
	// maxTable bounds the table's bytes below the run's output cap, so
	// the header and the row count are never cut off by it.
	maxTable = protocol.MaxOutputBytes - 1024
)

// nullText is how the table shows SQL NULL.
const nullText = "NULL"

// table collects the first MaxRows rows of a result, as text, and counts
// them all.
type table struct {
	cols  []string
	rows  [][]string
	total int64
}

func newTable(cols []string) *table {
	t := &table{cols: make([]string, len(cols))}
	for i, c := range cols {
		t.cols[i] = cell(c)
	}
	return t
}

// wants says the next row is one the table shows (the caller then adds it
// with add; the others it only counts with skip).
func (t *table) wants() bool { return len(t.rows) < MaxRows }

// add records a shown row; a nil value is NULL.
func (t *table) add(vals []*string) {
	t.total++
	row := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			row[i] = nullText
		} else {
			row[i] = cell(*v)
		}
	}
	t.rows = append(t.rows, row)
}

// skip counts a row beyond those shown.
func (t *table) skip() { t.total++ }

// String renders the table: the column names, a rule, one line per row,
// the values left-aligned and separated by " | ", then the row count.
func (t *table) String() string {
	width := make([]int, len(t.cols))
	for i, c := range t.cols {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.rows {
		for i, v := range r {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	var b strings.Builder
	line := func(vals []string) string {
		var l strings.Builder
		for i, v := range vals {
			if i > 0 {
				l.WriteString(" | ")
			}
			l.WriteString(v)
			if i < len(vals)-1 {
				l.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(v)))
			}
		}
		return strings.TrimRight(l.String(), " ") + "\n"
	}
	b.WriteString(line(t.cols))
	for i, w := range width {
		if i > 0 {
			b.WriteString("-+-")
		}
		b.WriteString(strings.Repeat("-", w))
	}
	b.WriteString("\n")
	shown := 0
	for _, r := range t.rows {
		l := line(r)
		if b.Len()+len(l) > maxTable {
			break
		}
		b.WriteString(l)
		shown++
	}
	switch {
	case int64(shown) == t.total:
		b.WriteString(fmt.Sprintf("(%d %s)\n", t.total, plural(t.total, "row", "rows")))
	case shown == len(t.rows):
		b.WriteString(fmt.Sprintf("(showing the first %d of %d rows)\n", shown, t.total))
	default:
		b.WriteString(fmt.Sprintf("(showing the first %d of %d rows: the output is capped at %d KiB)\n", shown, t.total, protocol.MaxOutputBytes>>10))
	}
	return b.String()
}

// cell is a value as one bounded line of valid text: line breaks and tabs
// escaped, at most MaxCell characters.
func cell(v string) string {
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	if strings.ContainsAny(v, "\n\r\t\x00") {
		v = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`, "\x00", `\0`).Replace(v)
	}
	if utf8.RuneCountInString(v) > MaxCell {
		n := 0
		for i := range v {
			if n == MaxCell-1 {
				return v[:i] + "…"
			}
			n++
		}
	}
	return v
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// affected is the output of a statement that returns no rows.
func affected(n int64) string {
	return fmt.Sprintf("%d %s affected", n, plural(n, "row", "rows"))
}
