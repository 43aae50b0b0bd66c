package sqltask

import (
	"reflect"
	"strings"
	"testing"
)

func texts(ps []piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.text
	}
	return out
}

func TestExecutorSQLSplitScriptPostgres(t *testing.T) {
	t.Parallel()
	script := `-- leading comment; not a cut;
UPDATE t SET v = 'a;
b;' WHERE id = 1;
INSERT INTO t VALUES (E'it\'s;
', "we;ird");   -- trailing comment
CREATE FUNCTION f() RETURNS int AS $body$
BEGIN
  RETURN 1;
END;
$body$ LANGUAGE plpgsql;
/* block /* nested; */ still;
comment */ SELECT $$x;
$$, a$b$c;
SELECT 1; SELECT 2
;
-- only a comment;
`
	got := splitScript(script, false)
	want := []string{
		"UPDATE t SET v = 'a;\nb;' WHERE id = 1",
		"INSERT INTO t VALUES (E'it\\'s;\n', \"we;ird\")",
		"CREATE FUNCTION f() RETURNS int AS $body$\nBEGIN\n  RETURN 1;\nEND;\n$body$ LANGUAGE plpgsql",
		"SELECT $$x;\n$$, a$b$c",
		"SELECT 1; SELECT 2",
	}
	if !reflect.DeepEqual(texts(got), want) {
		t.Fatalf("pieces:\n%q\nwant\n%q", texts(got), want)
	}
	lines := []int{2, 4, 6, 12, 14}
	for i, p := range got {
		if p.line != lines[i] {
			t.Errorf("piece %d starts on line %d, want %d", i+1, p.line, lines[i])
		}
		if p.midSemicolon != (i == 4) {
			t.Errorf("piece %d midSemicolon = %v", i+1, p.midSemicolon)
		}
	}
}

func TestExecutorSQLSplitScriptMySQL(t *testing.T) {
	t.Parallel()
	script := "# hash comment;\nUPDATE t SET v = 'it\\'s;\n' WHERE `we;ird` = \"a\\\";\n\";\n" +
		"/*!40101 SET NAMES utf8mb4 */;\n" +
		"SELECT 1 --1;\n, 2;\n" +
		"SELECT '$$;\n' ;  # done\n"
	got := splitScript(script, true)
	want := []string{
		"UPDATE t SET v = 'it\\'s;\n' WHERE `we;ird` = \"a\\\";\n\"",
		"/*!40101 SET NAMES utf8mb4 */",
		"SELECT 1 --1",
		", 2",
		"SELECT '$$;\n'",
	}
	if !reflect.DeepEqual(texts(got), want) {
		t.Fatalf("pieces:\n%q\nwant\n%q", texts(got), want)
	}
}

func TestExecutorSQLSplitScriptUnterminatedAndEmpty(t *testing.T) {
	t.Parallel()
	if got := splitScript(" \n-- nothing;\n/* at all; */\n;\n", false); len(got) != 0 {
		t.Fatalf("pieces of a script of comments: %q", texts(got))
	}
	if got := texts(splitScript("SELECT 'open;\nstring", false)); !reflect.DeepEqual(got, []string{"SELECT 'open;\nstring"}) {
		t.Fatalf("unterminated string: %q", got)
	}
	if got := texts(splitScript("SELECT $a$ open;\n", false)); len(got) != 1 {
		t.Fatalf("unterminated dollar quote: %q", got)
	}
}

func TestExecutorSQLTableBoundsCellsRowsAndBytes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 500)
	tb := newTable([]string{"id", "note"})
	one, nl := "1", "a\nb\tc"
	tb.add([]*string{&one, nil})
	tb.add([]*string{&nl, &long})
	got := tb.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 5 || lines[0] != "id      | note" || lines[2] != "1       | NULL" || lines[4] != "(2 rows)" {
		t.Fatalf("table:\n%s", got)
	}
	if !strings.HasPrefix(lines[3], `a\nb\tc | éé`) || !strings.HasSuffix(lines[3], "é…") || len([]rune(lines[3])) != 10+MaxCell {
		t.Fatalf("row with a long value: %q (%d runes)", lines[3], len([]rune(lines[3])))
	}
	// 100 wide rows are more than the output cap: the table stops before.
	wide := newTable([]string{"a", "b", "c", "d"})
	v := strings.Repeat("x", MaxCell)
	for range 150 {
		if wide.wants() {
			wide.add([]*string{&v, &v, &v, &v})
		} else {
			wide.skip()
		}
	}
	s := wide.String()
	if len(s) > maxTable+200 || !strings.Contains(s, "of 150 rows: the output is capped") {
		t.Fatalf("wide table: %d bytes, ends %q", len(s), s[len(s)-120:])
	}
}
