package master

import (
	"fmt"
	"unicode/utf8"
)

// tailOutput keeps the last max bytes of a valid UTF-8 output, starting on a
// character boundary, behind a notice saying how much was cut.
func tailOutput(s string, max int) string {
	if len(s) <= max {
		return s
	}
	start := tailStart(s, max)
	return fmt.Sprintf("[… %d earlier bytes truncated]\n", start) + s[start:]
}

// tailStart is where the last n bytes of s begin, moved forward to a
// character boundary.
func tailStart(s string, n int) int {
	start := max(len(s)-n, 0)
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return start
}
