package protocol

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Interval alignments (Schedule.Align): where in its interval a task fires.
const (
	// AlignSpread fires at a stable offset within the interval derived from
	// the task's id (IntervalPhase), so a thousand hourly tasks do not all
	// fire at hh:00:00. The default of new interval tasks.
	AlignSpread = "spread"
	// AlignEpoch fires at the multiples of the interval (hh:00:00 for
	// 1h). Interval tasks made before spreading existed keep it, and ""
	// reads as it, so their times never move on upgrade.
	AlignEpoch = "epoch"
)

// maxPhaseSlots bounds the distinct offsets IntervalPhase hands out per
// interval length: tasks with the same offset share one timer on a worker,
// so this also bounds a worker's timers per interval length.
const maxPhaseSlots = 3600

// specHash is the stable 64-bit hash every node computes the same way for
// a task's spread: FNV-1a of the task id and what it spreads. It must never
// change, or every spread task's times would move.
func specHash(seed, what string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	h.Write([]byte{0})
	h.Write([]byte(what))
	return h.Sum64()
}

// IntervalPhase is the offset within every at which a spread interval task
// with id fires: a whole number of seconds from 0 to every-1s, one of at
// most 3600 evenly spaced offsets (every 24 s for a day), the same on every
// node and across restarts. Intervals of a second have none.
func IntervalPhase(id string, every time.Duration) time.Duration {
	secs := int64(every / time.Second)
	if secs <= 1 {
		return 0
	}
	slots := min(secs, maxPhaseSlots)
	step := secs / slots
	return time.Duration(int64(specHash(id, "every "+strconv.FormatInt(secs, 10))%uint64(slots))*step) * time.Second
}

// cronField is the range of one cron field, for the H forms.
type cronField struct {
	name   string
	lo, hi int
	// hashHi is the top of a bare H's range when it is below hi: H in the
	// day of month picks from 1-28, so it fires in every month.
	hashHi int
}

var (
	cronFields5 = []cronField{{"minute", 0, 59, 0}, {"hour", 0, 23, 0}, {"day of month", 1, 31, 28}, {"month", 1, 12, 0}, {"day of week", 0, 6, 0}}
	cronFields6 = append([]cronField{{"second", 0, 59, 0}}, cronFields5...)
)

// HasHashed reports whether a cron expression uses the H forms: a list item
// of a field starts with H (no month or day name does).
func HasHashed(expr string) bool {
	for _, p := range strings.Fields(expr) {
		for _, it := range strings.Split(p, ",") {
			if isHashed(it) {
				return true
			}
		}
	}
	return false
}

func isHashed(item string) bool { return item != "" && (item[0] == 'H' || item[0] == 'h') }

// ExpandHashed replaces the Jenkins-style hashed forms of a cron expression
// with the numbers they stand for, for the task with id seed:
//
//	H         a stable value in the field's range (day of month: 1-28)
//	H(a-b)    a stable value from a to b
//	H/n       every n, from a stable start below n (H/15 minutes: 7,22,37,52)
//	H(a-b)/n  every n from a to b, from a stable start
//
// so "H * * * *" is one minute of every hour, the same for the task on every
// node, and different tasks spread over the hour. An H may stand wherever a
// number or range may, in a list too. An expression without H is returned as
// it is; one with a malformed H is refused in a sentence naming the field
// (minute "H(0-99)": H(0-99) is outside 0-59).
func ExpandHashed(expr, seed string) (string, error) {
	if !HasHashed(expr) {
		return expr, nil
	}
	parts := strings.Fields(expr)
	var fields []cronField
	switch len(parts) {
	case 5:
		fields = cronFields5
	case 6:
		fields = cronFields6
	default:
		return "", fmt.Errorf("H needs 5 fields, or 6 with leading seconds (got %d)", len(parts))
	}
	for i, p := range parts {
		f := fields[i]
		items := strings.Split(p, ",")
		for j, it := range items {
			if !isHashed(it) {
				continue
			}
			out, err := expandH(it, f, seed+"/"+strconv.Itoa(j))
			if err != nil {
				return "", fmt.Errorf("%s %q: %v", f.name, it, err)
			}
			items[j] = out
		}
		parts[i] = strings.Join(items, ",")
	}
	return strings.Join(parts, " "), nil
}

// expandH expands one list item holding an H for field f.
func expandH(it string, f cronField, seed string) (string, error) {
	const forms = "H must be H, H(a-b), H/n or H(a-b)/n"
	rest := it[1:]
	lo, hi, ranged := f.lo, f.hi, false
	if f.hashHi != 0 {
		hi = f.hashHi
	}
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", fmt.Errorf("%s: missing )", forms)
		}
		a, b, ok := strings.Cut(rest[1:end], "-")
		if !ok {
			return "", fmt.Errorf("%s: H(a-b) needs a range like H(0-29)", forms)
		}
		var err1, err2 error
		lo, err1 = strconv.Atoi(strings.TrimSpace(a))
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
		switch {
		case err1 != nil || err2 != nil:
			return "", fmt.Errorf("H(a-b) needs whole numbers")
		case lo < f.lo || hi > f.hi:
			return "", fmt.Errorf("H(%d-%d) is outside %d-%d", lo, hi, f.lo, f.hi)
		case lo > hi:
			return "", fmt.Errorf("H(%d-%d) runs backwards", lo, hi)
		}
		rest, ranged = rest[end+1:], true
	}
	h := specHash(seed, f.name)
	if rest == "" {
		return strconv.Itoa(lo + int(h%uint64(hi-lo+1))), nil
	}
	if !strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("%s", forms)
	}
	step, err := strconv.Atoi(rest[1:])
	if err != nil || step < 1 {
		return "", fmt.Errorf("H/n needs a whole number n of at least 1")
	}
	if !ranged {
		hi = f.hi // H/n steps through the whole field, 29-31 included
	}
	if step > hi-lo+1 {
		return "", fmt.Errorf("the step %d is longer than the range %d-%d", step, lo, hi)
	}
	start := lo + int(h%uint64(step))
	return fmt.Sprintf("%d-%d/%d", start, hi, step), nil
}
