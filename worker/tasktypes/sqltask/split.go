package sqltask

import "strings"

// piece is one statement of a script.
type piece struct {
	// text is the statement without its ending ';', its leading comments
	// and the blanks around it.
	text string
	// line is the script's line (from 1) the statement starts on.
	line int
	// midSemicolon says the statement holds a ';' outside quotes and
	// comments that does not end a line: the script was not split there,
	// which the server's error about several commands then explains.
	midSemicolon bool
}

// splitScript cuts a script into its statements at each ';' that ends a
// line (only blanks or a line comment after it), outside quoted strings and
// identifiers, comments and, for PostgreSQL, dollar-quoted bodies. A ';'
// within a line does not split, so a one-line body such as a MySQL
// BEGIN ... END block is left whole if written on one line. Statements with
// nothing but blanks and comments are dropped.
//
// It follows each server's lexical rules closely enough to find those
// ';': PostgreSQL's E'..' strings with backslash escapes, $tag$ quotes and
// nested /* */ comments; MySQL's backslash escapes in '..' and "..",
// `identifiers`, '#' and '-- ' comments, and /*! */ executable comments,
// which count as code.
func splitScript(s string, mysql bool) []piece {
	var (
		out       []piece
		codeStart = -1 // the current statement's first byte of code
		mid       bool
		line      = 1
		lineAt    = 0 // the byte up to which line was counted
		startLine int
	)
	lineOf := func(i int) int {
		line += strings.Count(s[lineAt:i], "\n")
		lineAt = i
		return line
	}
	code := func(i int) {
		if codeStart < 0 {
			codeStart = i
			startLine = lineOf(i)
		}
	}
	cut := func(end int) {
		if codeStart >= 0 {
			out = append(out, piece{text: strings.TrimSpace(s[codeStart:end]), line: startLine, midSemicolon: mid})
		}
		codeStart, mid = -1, false
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'':
			code(i)
			i = skipQuoted(s, i, '\'', mysql || isEString(s, i))
		case c == '"':
			code(i)
			i = skipQuoted(s, i, '"', mysql)
		case c == '`' && mysql:
			code(i)
			i = skipQuoted(s, i, '`', false)
		case c == '$' && !mysql && dollarTag(s, i) != "":
			code(i)
			tag := dollarTag(s, i)
			if end := strings.Index(s[i+len(tag):], tag); end >= 0 {
				i += len(tag) + end + len(tag)
			} else {
				i = len(s)
			}
		case isLineComment(s, i, mysql):
			i = endOfLine(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if mysql && i+2 < len(s) && (s[i+2] == '!' || s[i+2] == '+') {
				code(i) // executable comment or optimizer hint: code to MySQL
			}
			i = skipBlockComment(s, i, !mysql)
		case c == ';':
			if endsLine(s, i+1, mysql) {
				cut(i)
			} else if codeStart >= 0 {
				mid = true
			}
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		default:
			code(i)
			i++
		}
	}
	cut(len(s))
	return out
}

// skipQuoted returns the index after the quoted text opened at s[i] by q,
// a doubled q standing for one; backslash makes '\' escape the next byte.
func skipQuoted(s string, i int, q byte, backslash bool) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if backslash {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

// isEString says the quote at s[i] opens a PostgreSQL E'..' string, whose
// backslashes escape.
func isEString(s string, i int) bool {
	return i > 0 && (s[i-1] == 'e' || s[i-1] == 'E') && (i < 2 || !identByte(s[i-2]))
}

// dollarTag returns the PostgreSQL dollar quote ($$ or $tag$) opening at
// s[i], or "".
func dollarTag(s string, i int) string {
	if i > 0 && identByte(s[i-1]) { // part of an identifier such as a$b
		return ""
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[i : j+1]
		case c >= '0' && c <= '9':
			if j == i+1 { // $1: a parameter
				return ""
			}
		case !identByte(c):
			return ""
		}
	}
	return ""
}

// identByte says c can be part of an unquoted identifier (bytes of
// non-ASCII letters included).
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// isLineComment says a comment to the end of the line starts at s[i]: '--'
// (followed by a blank in MySQL) or, in MySQL, '#'.
func isLineComment(s string, i int, mysql bool) bool {
	if s[i] == '#' {
		return mysql
	}
	if s[i] != '-' || i+1 >= len(s) || s[i+1] != '-' {
		return false
	}
	return !mysql || i+2 >= len(s) || s[i+2] <= ' '
}

func endOfLine(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// skipBlockComment returns the index after the /* */ comment at s[i];
// PostgreSQL's nest.
func skipBlockComment(s string, i int, nested bool) int {
	depth := 0
	for j := i; j+1 < len(s); j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*':
			if depth == 0 || nested {
				depth++
			}
			j++
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(s)
}

// endsLine says only blanks, then maybe a line comment, follow s[i:] to
// the end of its line.
func endsLine(s string, i int, mysql bool) bool {
	for ; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\f', '\v':
		case '\n':
			return true
		default:
			return isLineComment(s, i, mysql)
		}
	}
	return true
}
