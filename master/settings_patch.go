package master

import (
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// ParseDays reads a duration written as a Go duration ("24h"), a number of
// whole days ("7d") or "0".
func ParseDays(v string) (time.Duration, bool) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100*365 {
			return 0, false
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil
}

// FormatDays writes a duration the way ParseDays reads it: whole days from two
// days up as "7d", else as a short Go duration ("24h", "0").
func FormatDays(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return strconv.Itoa(int(d/day)) + "d"
	}
	if d == 0 {
		return "0"
	}
	return shortDuration(d)
}

// shortDuration writes d without its trailing zero units ("24h", not
// "24h0m0s").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// SettingsPatch is the body of PATCH /api/v1/settings: each field given
// changes, the others keep their stored values. Durations are Go durations
// ("10s", "1m30s"); prune_offline_after also takes days ("7d"). The SMTP
// password is write-only: a value sets it, "" removes it.
type SettingsPatch struct {
	HealthInterval        *string `json:"health_interval,omitempty"`
	HealthTimeout         *string `json:"health_timeout,omitempty"`
	MaxFailures           *int    `json:"max_failures,omitempty"`
	DefaultHTTPTimeout    *string `json:"default_http_timeout,omitempty"`
	RunRetentionDays      *int    `json:"run_retention_days,omitempty"`
	TaskVersionsKept      *int    `json:"task_versions_kept,omitempty"`
	PruneOfflineAfter     *string `json:"prune_offline_after,omitempty"`
	ApproveNewNodes       *bool   `json:"approve_new_nodes,omitempty"`
	LocalLoginsAdminsOnly *bool   `json:"local_logins_admins_only,omitempty"`
	SMTPHost              *string `json:"smtp_host,omitempty"`
	SMTPPort              *int    `json:"smtp_port,omitempty"`
	SMTPFrom              *string `json:"smtp_from,omitempty"`
	SMTPUsername          *string `json:"smtp_username,omitempty"`
	SMTPPassword          *string `json:"smtp_password,omitempty"`
	SMTPTLS               *string `json:"smtp_tls,omitempty"`
	WebhookURL            *string `json:"webhook_url,omitempty"`
	PublicURL             *string `json:"public_url,omitempty"`
	WebhookAllowHosts     *string `json:"webhook_allow_hosts,omitempty"`
}

// Change turns the patch into a change of the stored settings, or returns the
// errors of the values that do not parse; the engine checks the ranges of
// the settings it makes, whole.
func (p *SettingsPatch) Change() (func(*Settings), protocol.FieldErrors) {
	fe := protocol.FieldErrors{}
	var sets []func(*Settings)
	dur := func(field string, v *string, set func(*Settings, time.Duration)) {
		if v == nil {
			return
		}
		d, err := time.ParseDuration(strings.TrimSpace(*v))
		if err != nil {
			fe[field] = "must be a Go duration such as 10s, 1m30s or 500ms"
			return
		}
		sets = append(sets, func(s *Settings) { set(s, d) })
	}
	dur("health_interval", p.HealthInterval, func(s *Settings, d time.Duration) { s.HealthInterval = d })
	dur("health_timeout", p.HealthTimeout, func(s *Settings, d time.Duration) { s.HealthTimeout = d })
	dur("default_http_timeout", p.DefaultHTTPTimeout, func(s *Settings, d time.Duration) { s.DefaultHTTPTimeout = d })
	if p.PruneOfflineAfter != nil {
		if d, ok := ParseDays(strings.TrimSpace(*p.PruneOfflineAfter)); ok {
			sets = append(sets, func(s *Settings) { s.PruneOfflineAfter = d })
		} else {
			fe["prune_offline_after"] = "must be 0 (never), a number of days such as 7d, or a Go duration such as 24h or 36h"
		}
	}
	if p.MaxFailures != nil {
		sets = append(sets, func(s *Settings) { s.MaxFailures = *p.MaxFailures })
	}
	if p.RunRetentionDays != nil {
		sets = append(sets, func(s *Settings) { s.RunRetentionDays = *p.RunRetentionDays })
	}
	if p.TaskVersionsKept != nil {
		sets = append(sets, func(s *Settings) { s.TaskVersionsKept = *p.TaskVersionsKept })
	}
	if p.SMTPPort != nil {
		sets = append(sets, func(s *Settings) { s.SMTPPort = *p.SMTPPort })
	}
	if p.ApproveNewNodes != nil {
		sets = append(sets, func(s *Settings) { s.ApproveNewNodes = *p.ApproveNewNodes })
	}
	if p.LocalLoginsAdminsOnly != nil {
		sets = append(sets, func(s *Settings) { s.LocalAdminsOnly = *p.LocalLoginsAdminsOnly })
	}
	if p.SMTPHost != nil {
		sets = append(sets, func(s *Settings) { s.SMTPHost = strings.TrimSpace(*p.SMTPHost) })
	}
	if p.SMTPFrom != nil {
		sets = append(sets, func(s *Settings) { s.SMTPFrom = strings.TrimSpace(*p.SMTPFrom) })
	}
	if p.SMTPUsername != nil {
		sets = append(sets, func(s *Settings) { s.SMTPUsername = strings.TrimSpace(*p.SMTPUsername) })
	}
	if p.SMTPPassword != nil {
		sets = append(sets, func(s *Settings) { s.SMTPPassword = *p.SMTPPassword })
	}
	if p.SMTPTLS != nil {
		sets = append(sets, func(s *Settings) { s.SMTPTLS = strings.TrimSpace(*p.SMTPTLS) })
	}
	if p.WebhookURL != nil {
		sets = append(sets, func(s *Settings) { s.WebhookURL = strings.TrimSpace(*p.WebhookURL) })
	}
	if p.PublicURL != nil {
		sets = append(sets, func(s *Settings) { s.PublicURL = strings.TrimSpace(*p.PublicURL) })
	}
	if p.WebhookAllowHosts != nil {
		sets = append(sets, func(s *Settings) { s.WebhookAllowHosts = strings.TrimSpace(*p.WebhookAllowHosts) })
	}
	if len(fe) > 0 {
		return nil, fe
	}
	return func(s *Settings) {
		for _, set := range sets {
			set(s)
		}
	}, nil
}

// SettingsPatchOf is the patch that sets every field to st's value, but the
// SMTP password (write-only: left out, it stays as stored).
func SettingsPatchOf(st Settings) SettingsPatch {
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	yes := func(b bool) *bool { return &b }
	return SettingsPatch{
		HealthInterval: str(shortDuration(st.HealthInterval)), HealthTimeout: str(shortDuration(st.HealthTimeout)),
		MaxFailures: num(st.MaxFailures), DefaultHTTPTimeout: str(shortDuration(st.DefaultHTTPTimeout)),
		RunRetentionDays: num(st.RunRetentionDays), TaskVersionsKept: num(st.TaskVersionsKept), PruneOfflineAfter: str(FormatDays(st.PruneOfflineAfter)),
		ApproveNewNodes: yes(st.ApproveNewNodes), LocalLoginsAdminsOnly: yes(st.LocalAdminsOnly),
		SMTPHost: str(st.SMTPHost), SMTPPort: num(st.SMTPPort), SMTPFrom: str(st.SMTPFrom), SMTPUsername: str(st.SMTPUsername),
		SMTPTLS: str(st.SMTPTLS), WebhookURL: str(st.WebhookURL), PublicURL: str(st.PublicURL),
		WebhookAllowHosts: str(st.WebhookAllowHosts),
	}
}

// jsonFieldOrder lists the JSON names of v's struct fields in the order
// they are declared: the order an export writes them in.
func jsonFieldOrder(v any) []string {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
