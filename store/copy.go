package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// CopyOptions bound CopyData.
type CopyOptions struct {
	// Batch is how many rows one read and one INSERT carry at most
	// (default 500); an INSERT also stops at copyBatchBytes.
	Batch int
	// Force empties a target that holds data first, instead of refusing it.
	Force bool
	// Progress, when set, is told each table's progress.
	Progress func(table string, copied, total int64)
}

// TableCopy is what CopyData did with one table.
type TableCopy struct {
	Table string
	// Source and Target are the tables' row counts after the copy.
	Source, Target int64
	Took           time.Duration
}

// OK reports whether the target has as many rows as the source.
func (c TableCopy) OK() bool { return c.Source == c.Target }

// ErrTargetNotEmpty means the target database already holds cluster data
// (CopyOptions.Force empties it first).
var ErrTargetNotEmpty = errors.New("store: the target database holds data")

// ErrCountMismatch means a table's row count differs between source and
// target after the copy (a master wrote to the source meanwhile).
var ErrCountMismatch = errors.New("store: row counts differ after the copy")

// seedTables are filled by the migrations themselves (the cluster lease,
// the default project): rows there do not make a target "not empty".
var seedTables = []string{"leases", "projects"}

// copyBatchBytes bounds the values of one INSERT of CopyData (MySQL refuses
// a statement past max_allowed_packet).
const copyBatchBytes = 4 << 20

// CopyData copies every table of the cluster (every table of the target's
// schema but bun's migration tables) from src to dst, which must both have
// every migration of this build and none other: rows in primary-key order,
// in batches, each batch one INSERT, values converted to the target's
// column types (booleans, times in UTC, NULLs kept). A target holding data
// (rows in any table but seedTables) is refused with ErrTargetNotEmpty
// unless opts.Force; the target's tables are emptied before the copy (the
// migrations' seed rows included: the source's come instead). PostgreSQL's
// identity sequences are moved past the copied ids. At the end every table
// is counted on both sides; a difference gives ErrCountMismatch with the
// report.
func CopyData(ctx context.Context, src, dst *Store, opts CopyOptions) ([]TableCopy, error) {
	if opts.Batch <= 0 {
		opts.Batch = 500
	}
	for _, s := range []*Store{src, dst} {
		st, err := s.MigrationStatus(ctx)
		if err != nil {
			return nil, err
		}
		if p := st.Pending(); len(p) > 0 {
			return nil, fmt.Errorf("store: the %s database lacks %d migration(s) of this version (first: %s)", s.Dialect, len(p), p[0])
		}
		if len(st.Unknown) > 0 {
			return nil, fmt.Errorf("store: the %s database has %d migration(s) of a newer version (first: %s): use that version", s.Dialect, len(st.Unknown), st.Unknown[0].Name)
		}
	}
	tables, err := dst.tables(ctx)
	if err != nil {
		return nil, err
	}
	var full []string
	for _, t := range tables {
		if slices.Contains(seedTables, t) {
			continue
		}
		n, err := countRows(ctx, dst.DB, t)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s (%d rows)", t, n))
		}
	}
	if len(full) > 0 && !opts.Force {
		return nil, fmt.Errorf("%w: %s", ErrTargetNotEmpty, strings.Join(full, ", "))
	}
	for _, t := range tables {
		if _, err := dst.DB.NewDelete().TableExpr("?", bun.Ident(t)).Where("1 = 1").Exec(ctx); err != nil {
			return nil, fmt.Errorf("store: empty target table %s: %w", t, err)
		}
	}
	var report []TableCopy
	mismatch := false
	for _, t := range tables {
		start := time.Now()
		if err := copyTable(ctx, src, dst, t, opts); err != nil {
			return report, fmt.Errorf("store: copy %s: %w", t, err)
		}
		c := TableCopy{Table: t, Took: time.Since(start)}
		if c.Source, err = countRows(ctx, src.DB, t); err != nil {
			return report, err
		}
		if c.Target, err = countRows(ctx, dst.DB, t); err != nil {
			return report, err
		}
		mismatch = mismatch || !c.OK()
		report = append(report, c)
	}
	if dst.Dialect == Postgres {
		if err := resetIdentities(ctx, dst.DB); err != nil {
			return report, err
		}
	}
	if mismatch {
		return report, ErrCountMismatch
	}
	return report, nil
}

// countRows counts the rows of table.
func countRows(ctx context.Context, db bun.IDB, table string) (int64, error) {
	var n int64
	if err := db.NewSelect().TableExpr("?", bun.Ident(table)).ColumnExpr("COUNT(*)").Scan(ctx, &n); err != nil {
		return 0, fmt.Errorf("store: count %s: %w", table, err)
	}
	return n, nil
}

// colKind is how a column's values are converted for the target.
type colKind int

const (
	kindText colKind = iota
	kindInt
	kindBool
	kindTime
)

// column is one column of a table in the target.
type column struct {
	name string
	kind colKind
}

// tables lists the tables of the database, bun's migration tables left
// out, in name order.
func (s *Store) tables(ctx context.Context) ([]string, error) {
	var names []string
	var err error
	switch s.Dialect {
	case SQLite:
		err = s.DB.NewRaw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").Scan(ctx, &names)
	case Postgres:
		err = s.DB.NewRaw("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name").Scan(ctx, &names)
	default:
		err = s.DB.NewRaw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name").Scan(ctx, &names)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list tables: %w", err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, "bun_migration") }), nil
}

// columns lists the columns of table that can be written (generated
// columns left out) with their kinds, and the columns of its primary key.
func (s *Store) columns(ctx context.Context, table string) (cols []column, pk []string, err error) {
	var rows []struct {
		Name string `bun:"name"`
		Type string `bun:"type"`
		PK   int    `bun:"pk"`
	}
	switch s.Dialect {
	case SQLite:
		// table_info leaves generated columns out; pk is the column's place in the key.
		err = s.DB.NewRaw("SELECT name, type, pk FROM pragma_table_info(?)", table).Scan(ctx, &rows)
	case Postgres:
		err = s.DB.NewRaw(`SELECT c.column_name AS name, c.data_type AS type,
			COALESCE((SELECT k.ordinal_position FROM information_schema.table_constraints AS tc
				JOIN information_schema.key_column_usage AS k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema AND k.table_name = tc.table_name
				WHERE tc.table_schema = c.table_schema AND tc.table_name = c.table_name AND tc.constraint_type = 'PRIMARY KEY' AND k.column_name = c.column_name), 0) AS pk
			FROM information_schema.columns AS c
			WHERE c.table_schema = current_schema() AND c.table_name = ? AND c.is_generated = 'NEVER'
			ORDER BY c.ordinal_position`, table).Scan(ctx, &rows)
	default:
		err = s.DB.NewRaw(`SELECT c.column_name AS name, c.column_type AS type,
			COALESCE((SELECT k.ordinal_position FROM information_schema.key_column_usage AS k
				WHERE k.table_schema = c.table_schema AND k.table_name = c.table_name AND k.constraint_name = 'PRIMARY' AND k.column_name = c.column_name), 0) AS pk
			FROM information_schema.columns AS c
			WHERE c.table_schema = DATABASE() AND c.table_name = ? AND c.extra NOT LIKE '%GENERATED%'
			ORDER BY c.ordinal_position`, table).Scan(ctx, &rows)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: columns of %s: %w", table, err)
	}
	keyed := map[int]string{}
	for _, r := range rows {
		cols = append(cols, column{name: r.Name, kind: kindOf(r.Type)})
		if r.PK > 0 {
			keyed[r.PK] = r.Name
		}
	}
	for i := 1; i <= len(keyed); i++ {
		pk = append(pk, keyed[i])
	}
	return cols, pk, nil
}

// kindOf maps a column's declared type (any dialect) to its kind.
func kindOf(typ string) colKind {
	t := strings.ToLower(typ)
	switch {
	case t == "boolean" || t == "bool" || strings.HasPrefix(t, "tinyint(1)"):
		return kindBool
	case strings.Contains(t, "time") || strings.Contains(t, "date"):
		return kindTime
	case strings.Contains(t, "int"):
		return kindInt
	}
	return kindText
}

// copyTable copies one table from src to dst in batches, reading in the
// source's primary-key order (rowid on SQLite) and resuming after the last
// key read.
func copyTable(ctx context.Context, src, dst *Store, table string, opts CopyOptions) error {
	cols, _, err := dst.columns(ctx, table)
	if err != nil {
		return err
	}
	srcCols, pk, err := src.columns(ctx, table)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, c := range srcCols {
		have[c.name] = true
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		if !have[c.name] {
			return fmt.Errorf("the source has no column %s: are both at the same migration?", c.name)
		}
		names[i] = c.name
	}
	key := pk
	if src.Dialect == SQLite {
		key = []string{"rowid"}
	}
	if len(key) == 0 {
		return errors.New("the source table has no primary key")
	}
	total, err := countRows(ctx, src.DB, table)
	if err != nil {
		return err
	}
	var last []any // the key of the last row read
	var copied int64
	for {
		q := src.DB.NewSelect().TableExpr("?", bun.Ident(table))
		for _, k := range key {
			q = q.ColumnExpr("?", bun.Ident(k))
		}
		for _, n := range names {
			q = q.ColumnExpr("?", bun.Ident(n))
		}
		if last != nil {
			idents := make([]any, len(key))
			for i, k := range key {
				idents[i] = bun.Ident(k)
			}
			marks := strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ")
			q = q.Where("("+marks+") > ("+marks+")", append(idents, last...)...)
		}
		for _, k := range key {
			q = q.OrderExpr("? ASC", bun.Ident(k))
		}
		rows, err := q.Limit(int64(opts.Batch)).Rows(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		batch, err := readBatch(rows, len(key), cols)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		if err := insertBatch(ctx, dst.DB, table, names, batch); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		copied += int64(len(batch))
		last = batch[len(batch)-1].key
		if opts.Progress != nil {
			opts.Progress(table, copied, total)
		}
		if len(batch) < opts.Batch {
			break
		}
	}
	return nil
}

// copyRow is one row read: its key in the source, its values for the target.
type copyRow struct {
	key  []any
	vals []any
	size int
}

// readBatch reads the rows of a batch, each its key columns then cols, and
// converts the values to cols' kinds.
func readBatch(rows *sql.Rows, nkey int, cols []column) ([]copyRow, error) {
	defer rows.Close()
	var out []copyRow
	for rows.Next() {
		raw := make([]any, nkey+len(cols))
		ptrs := make([]any, len(raw))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := copyRow{key: raw[:nkey], vals: make([]any, len(cols))}
		for i := range r.key {
			if b, ok := r.key[i].([]byte); ok {
				r.key[i] = string(b)
			}
		}
		for i, c := range cols {
			v, err := convert(raw[nkey+i], c.kind)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.name, err)
			}
			r.vals[i] = v
			if s, ok := v.(string); ok {
				r.size += len(s)
			}
			r.size += 16
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// timeLayouts are the text forms of times a driver may hand over (SQLite
// keeps times as text).
var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02",
}

// convert makes a value read from any driver fit a column of kind k.
func convert(v any, k colKind) (any, error) {
	if v == nil {
		return nil, nil
	}
	if b, ok := v.([]byte); ok {
		v = string(b)
	}
	switch k {
	case kindBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		case float64:
			return x != 0, nil
		case string:
			switch strings.ToLower(x) {
			case "1", "t", "true":
				return true, nil
			case "0", "f", "false":
				return false, nil
			}
		}
	case kindTime:
		switch x := v.(type) {
		case time.Time:
			return x.UTC(), nil
		case string:
			for _, l := range timeLayouts {
				if t, err := time.Parse(l, x); err == nil {
					return t.UTC(), nil
				}
			}
		}
	case kindInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		case string:
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n, nil
			}
		}
	default:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case time.Time:
			return x.UTC().Format("2006-01-02 15:04:05.999999"), nil
		}
	}
	return nil, fmt.Errorf("cannot convert %T %v", v, v)
}

// insertBatch inserts rows with as few INSERTs as copyBatchBytes allows.
func insertBatch(ctx context.Context, db bun.IDB, table string, names []string, rows []copyRow) error {
	idents := make([]any, len(names))
	for i, n := range names {
		idents[i] = bun.Ident(n)
	}
	colList := strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	for len(rows) > 0 {
		n, size := 0, 0
		for n < len(rows) && (n == 0 || size+rows[n].size <= copyBatchBytes) {
			size += rows[n].size
			n++
		}
		part := rows[:n]
		rows = rows[n:]
		var b strings.Builder
		args := append([]any{bun.Ident(table)}, idents...)
		b.WriteString("INSERT INTO ? (" + colList + ") VALUES ")
		// One placeholder a value (bun.In cannot take a nil).
		row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
		for i, r := range part {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(row)
			args = append(args, r.vals...)
		}
		if _, err := db.NewRaw(b.String(), args...).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resetIdentities moves each identity column's sequence past the largest id
// copied, so that the next row inserted gets a fresh id.
func resetIdentities(ctx context.Context, db bun.IDB) error {
	var ids []struct {
		Table  string `bun:"table_name"`
		Column string `bun:"column_name"`
	}
	err := db.NewRaw("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'").Scan(ctx, &ids)
	if err != nil {
		return fmt.Errorf("store: list identity columns: %w", err)
	}
	for _, id := range ids {
		_, err := db.NewRaw("SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT MAX(?) FROM ?), 0) + 1, false)",
			id.Table, id.Column, bun.Ident(id.Column), bun.Ident(id.Table)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: move the sequence of %s.%s: %w", id.Table, id.Column, err)
		}
	}
	return nil
}
