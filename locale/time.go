package locale

import (
	"strconv"
	"time"
)

// Ago says how long ago t was: "12s ago" / "12 秒前"; a time over two days
// old is written out (UTC), the zero time is "never".
func (l *Localizer) Ago(t, now time.Time) string {
	if t.IsZero() {
		return l.T("TimeNever")
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return l.T("TimeJustNow")
	case d < time.Minute:
		return l.N("TimeSecondsAgo", int(d.Seconds()))
	case d < time.Hour:
		return l.N("TimeMinutesAgo", int(d.Minutes()))
	case d < 48*time.Hour:
		return l.N("TimeHoursAgo", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// Until says how far ahead t is: "in 3m" / "3 分钟后"; over two days ahead it
// is written out (UTC).
func (l *Localizer) Until(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d < time.Second:
		return l.T("TimeNow")
	case d < time.Minute:
		return l.N("TimeInSeconds", int(d.Seconds()))
	case d < time.Hour:
		return l.N("TimeInMinutes", int(d.Minutes()))
	case d < 48*time.Hour:
		return l.N("TimeInHours", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// Duration writes a duration shortly: "1m30s", "2h" in English (Go's own
// notation, trimmed), "1 分 30 秒", "2 小时" in Chinese.
func (l *Localizer) Duration(d time.Duration) string {
	if !l.Chinese() {
		return ShortDuration(d)
	}
	if d < time.Second {
		if d <= 0 {
			return "0 秒"
		}
		return ShortDuration(d) // "250ms": a unit readers of both languages know
	}
	neg := d < 0
	if neg {
		d = -d
	}
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	sec := d % time.Minute
	out := ""
	add := func(s string) {
		if out != "" {
			out += " "
		}
		out += s
	}
	if h > 0 {
		add(itoa(h) + " 小时")
	}
	if m > 0 {
		add(itoa(m) + " 分")
	}
	if sec > 0 {
		if sec%time.Second == 0 {
			add(itoa(int64(sec/time.Second)) + " 秒")
		} else {
			add((sec.Round(time.Millisecond)).String())
		}
	}
	if neg {
		out = "-" + out
	}
	return out
}

// ShortDuration writes 1m0s as 1m and 2h0m0s as 2h.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if len(s) > 3 && s[len(s)-3:] == "m0s" {
		s = s[:len(s)-2]
	}
	if len(s) > 3 && s[len(s)-3:] == "h0m" {
		s = s[:len(s)-2]
	}
	return s
}

// Weekday names a day of the week shortly: "Mon" / "周一".
func (l *Localizer) Weekday(d time.Weekday) string {
	if !l.Chinese() {
		return d.String()[:3]
	}
	return [...]string{"周日", "周一", "周二", "周三", "周四", "周五", "周六"}[d]
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
