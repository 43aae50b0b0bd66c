package worker

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// tailBuffer keeps the last max bytes written to it: a run's output is bounded
// but its end, usually the interesting part, survives.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	max   int
	total int64 // bytes written in all
	// scrub masks the task's secret values in Output. It sees the whole
	// kept buffer (up to twice max), so a value split across writes is
	// masked; where earlier bytes were cut, the first Longest()-1 kept bytes
	// are dropped too, so a value cut in two leaves no end visible.
	scrub *protocol.Scrubber
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.max {
		// Only the end of a large write can survive: skip copying the rest.
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// written counts every byte written so far.
func (t *tailBuffer) written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// truncNotice starts an output whose beginning was cut off.
func truncNotice(n int64) string { return fmt.Sprintf("[… %d earlier bytes truncated]\n", n) }

// Output returns the kept tail as valid UTF-8 without NUL, at most max bytes
// plus a notice saying how many earlier bytes were cut, and whether bytes had
// to be replaced (binary output). The kept part starts on a character
// boundary, so a cut never splits a character.
func (t *tailBuffer) Output() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if t.total > int64(len(b)) {
		if n := min(t.scrub.Longest()-1, len(b)); n > 0 {
			b = b[n:] // may hold the end of a secret whose start is gone
		}
		// The buffer starts where earlier bytes were cut: skip the rest of a
		// character whose first bytes are gone.
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && b[0]&0xC0 == 0x80; i++ {
			b = b[1:]
		}
	}
	var grew int // bytes the masks added (negative: removed)
	if t.scrub != nil {
		n := len(b)
		b = []byte(t.scrub.Scrub(string(b)))
		grew = len(b) - n
	}
	// Walk back from the end, as far as max bytes of sanitized text reach:
	// replacement characters are longer than the bytes they replace.
	size, start := 0, len(b)
	for start > 0 {
		r, n := utf8.DecodeLastRune(b[:start])
		w := n
		if (r == utf8.RuneError && n == 1) || r == 0 {
			w = utf8.RuneLen(utf8.RuneError)
		}
		if size+w > t.max {
			break
		}
		size += w
		start -= n
	}
	kept := b[start:]
	s, binary := protocol.SanitizeOutput(string(kept))
	if dropped := t.total + int64(grew) - int64(len(kept)); dropped > 0 {
		s = truncNotice(dropped) + s
	}
	return s, binary
}

// String is the output text of Output.
func (t *tailBuffer) String() string {
	s, _ := t.Output()
	return s
}
