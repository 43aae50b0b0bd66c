package protocol

import (
	"strings"
	"unicode/utf8"
)

// SanitizeOutput makes run output safe to store and show, whatever bytes a
// worker sent: every NUL byte and every byte that is not part of valid UTF-8
// becomes U+FFFD, one for one, so odd bytes stay visible. binary reports that
// something was replaced. Both sides use it: the worker on what a run
// printed, the master again on what a worker sent, never trusting its cleaning.
func SanitizeOutput(s string) (out string, binary bool) {
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
