package master

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// sanitizeOutput makes run output safe to store and show, whatever bytes a
// worker sent: every NUL byte and every byte that is not part of valid UTF-8
// becomes U+FFFD, one for one, so odd bytes stay visible. binary reports that
// something was replaced. The master never trusts the worker's own cleaning.
func sanitizeOutput(s string) (out string, binary bool) {
	clean := true
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0 {
			clean = false
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), true
}

// tailOutput keeps the last max bytes of a valid UTF-8 output, starting on a
// character boundary, behind a notice saying how much was cut.
func tailOutput(s string, max int) string {
	if len(s) <= max {
		return s
	}
	start := len(s) - max
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return fmt.Sprintf("[… %d earlier bytes truncated]\n", start) + s[start:]
}
