package form

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Settings reads the settings form: the values as typed, the settings they
// make and the errors of the values that do not parse; the engine checks the
// ranges. The SMTP password is not among them: an empty field keeps the
// stored one (see SMTPPassword).
func Settings(v url.Values) (views.SettingsForm, master.Settings, protocol.FieldErrors) {
	get := func(name string) string { return strings.TrimSpace(v.Get(name)) }
	f := views.SettingsForm{
		HealthInterval: get("health_interval"), HealthTimeout: get("health_timeout"), MaxFailures: get("max_failures"),
		DefaultHTTPTimeout: get("default_http_timeout"), RunRetentionDays: get("run_retention_days"),
		SMTPHost: get("smtp_host"), SMTPPort: get("smtp_port"), SMTPFrom: get("smtp_from"), SMTPUsername: get("smtp_username"),
		SMTPTLS: get("smtp_tls"), WebhookURL: get("webhook_url"), PublicURL: get("public_url"),
		ApproveNewNodes: checked(v, "approve_new_nodes"), PruneOfflineAfter: get("prune_offline_after"),
		LocalAdminsOnly: checked(v, "local_logins_admins_only"), WebhookAllowHosts: get("webhook_allow_hosts"),
	}
	fe := protocol.FieldErrors{}
	st := master.Settings{SMTPHost: f.SMTPHost, SMTPFrom: f.SMTPFrom, SMTPUsername: f.SMTPUsername, SMTPTLS: f.SMTPTLS,
		WebhookURL: f.WebhookURL, PublicURL: f.PublicURL, ApproveNewNodes: f.ApproveNewNodes, LocalAdminsOnly: f.LocalAdminsOnly,
		WebhookAllowHosts: f.WebhookAllowHosts}
	dur := func(field, v string, dst *time.Duration) {
		d, err := time.ParseDuration(v)
		if err != nil {
			fe[field] = "must be a Go duration such as 10s, 1m30s or 500ms"
			return
		}
		*dst = d
	}
	num := func(field, v string, dst *int) {
		n, err := strconv.Atoi(v)
		if err != nil {
			fe[field] = "must be a whole number"
			return
		}
		*dst = n
	}
	dur("health_interval", f.HealthInterval, &st.HealthInterval)
	dur("health_timeout", f.HealthTimeout, &st.HealthTimeout)
	num("max_failures", f.MaxFailures, &st.MaxFailures)
	dur("default_http_timeout", f.DefaultHTTPTimeout, &st.DefaultHTTPTimeout)
	num("run_retention_days", f.RunRetentionDays, &st.RunRetentionDays)
	if d, ok := Days(f.PruneOfflineAfter); ok {
		st.PruneOfflineAfter = d
	} else {
		fe["prune_offline_after"] = "must be 0 (never), a number of days such as 7d, or a Go duration such as 24h or 36h"
	}
	if f.SMTPPort == "" {
		st.SMTPPort = master.DefaultSettings().SMTPPort
	} else {
		num("smtp_port", f.SMTPPort, &st.SMTPPort)
	}
	return f, st, fe
}

// checked reads a checkbox that follows a hidden input of the same name
// with value 0: the field is sent either way, and "1" among its values is
// a tick.
func checked(v url.Values, name string) bool { return slices.Contains(v[name], "1") }

// SettingsKeepOmitted gives every settings field the form did not send its
// stored value, so a client written before a field existed, or one that
// sends only what it changes, keeps the rest instead of being refused.
// The SMTP password is not among them (an empty one already keeps it).
func SettingsKeepOmitted(v url.Values, stored views.SettingsForm) {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	for name, val := range map[string]string{
		"health_interval": stored.HealthInterval, "health_timeout": stored.HealthTimeout, "max_failures": stored.MaxFailures,
		"default_http_timeout": stored.DefaultHTTPTimeout, "run_retention_days": stored.RunRetentionDays,
		"smtp_host": stored.SMTPHost, "smtp_port": stored.SMTPPort, "smtp_from": stored.SMTPFrom, "smtp_username": stored.SMTPUsername,
		"smtp_tls": stored.SMTPTLS, "webhook_url": stored.WebhookURL, "public_url": stored.PublicURL,
		"approve_new_nodes": flag(stored.ApproveNewNodes), "prune_offline_after": stored.PruneOfflineAfter,
		"local_logins_admins_only": flag(stored.LocalAdminsOnly), "webhook_allow_hosts": stored.WebhookAllowHosts,
	} {
		if _, sent := v[name]; !sent {
			v[name] = []string{val}
		}
	}
}

// SMTPPassword is the SMTP password the form asks for: the one typed, or,
// when the field is empty, the stored one unless "remove" was ticked.
func SMTPPassword(v url.Values, stored string) string {
	if p := v.Get("smtp_password"); p != "" || v.Get("smtp_password_clear") != "" {
		return p
	}
	return stored
}

// Days reads a duration written as a Go duration ("24h"), a number of
// whole days ("7d") or "0".
func Days(v string) (time.Duration, bool) {
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

// FormatDays writes a duration the way Days reads it: whole days from two
// days up as "7d", else as a short Go duration ("24h", "0").
func FormatDays(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return strconv.Itoa(int(d/day)) + "d"
	}
	if d == 0 {
		return "0"
	}
	return duration(d)
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
func (p *SettingsPatch) Change() (func(*master.Settings), protocol.FieldErrors) {
	fe := protocol.FieldErrors{}
	var sets []func(*master.Settings)
	dur := func(field string, v *string, set func(*master.Settings, time.Duration)) {
		if v == nil {
			return
		}
		d, err := time.ParseDuration(strings.TrimSpace(*v))
		if err != nil {
			fe[field] = "must be a Go duration such as 10s, 1m30s or 500ms"
			return
		}
		sets = append(sets, func(s *master.Settings) { set(s, d) })
	}
	dur("health_interval", p.HealthInterval, func(s *master.Settings, d time.Duration) { s.HealthInterval = d })
	dur("health_timeout", p.HealthTimeout, func(s *master.Settings, d time.Duration) { s.HealthTimeout = d })
	dur("default_http_timeout", p.DefaultHTTPTimeout, func(s *master.Settings, d time.Duration) { s.DefaultHTTPTimeout = d })
	if p.PruneOfflineAfter != nil {
		if d, ok := Days(strings.TrimSpace(*p.PruneOfflineAfter)); ok {
			sets = append(sets, func(s *master.Settings) { s.PruneOfflineAfter = d })
		} else {
			fe["prune_offline_after"] = "must be 0 (never), a number of days such as 7d, or a Go duration such as 24h or 36h"
		}
	}
	if p.MaxFailures != nil {
		sets = append(sets, func(s *master.Settings) { s.MaxFailures = *p.MaxFailures })
	}
	if p.RunRetentionDays != nil {
		sets = append(sets, func(s *master.Settings) { s.RunRetentionDays = *p.RunRetentionDays })
	}
	if p.SMTPPort != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPPort = *p.SMTPPort })
	}
	if p.ApproveNewNodes != nil {
		sets = append(sets, func(s *master.Settings) { s.ApproveNewNodes = *p.ApproveNewNodes })
	}
	if p.LocalLoginsAdminsOnly != nil {
		sets = append(sets, func(s *master.Settings) { s.LocalAdminsOnly = *p.LocalLoginsAdminsOnly })
	}
	if p.SMTPHost != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPHost = strings.TrimSpace(*p.SMTPHost) })
	}
	if p.SMTPFrom != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPFrom = strings.TrimSpace(*p.SMTPFrom) })
	}
	if p.SMTPUsername != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPUsername = strings.TrimSpace(*p.SMTPUsername) })
	}
	if p.SMTPPassword != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPPassword = *p.SMTPPassword })
	}
	if p.SMTPTLS != nil {
		sets = append(sets, func(s *master.Settings) { s.SMTPTLS = strings.TrimSpace(*p.SMTPTLS) })
	}
	if p.WebhookURL != nil {
		sets = append(sets, func(s *master.Settings) { s.WebhookURL = strings.TrimSpace(*p.WebhookURL) })
	}
	if p.PublicURL != nil {
		sets = append(sets, func(s *master.Settings) { s.PublicURL = strings.TrimSpace(*p.PublicURL) })
	}
	if p.WebhookAllowHosts != nil {
		sets = append(sets, func(s *master.Settings) { s.WebhookAllowHosts = strings.TrimSpace(*p.WebhookAllowHosts) })
	}
	if len(fe) > 0 {
		return nil, fe
	}
	return func(s *master.Settings) {
		for _, set := range sets {
			set(s)
		}
	}, nil
}
