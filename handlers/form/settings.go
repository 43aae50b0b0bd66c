package form

import (
	"net/url"
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
		ApproveNewNodes: get("approve_new_nodes") == "1", PruneOfflineAfter: get("prune_offline_after"),
		LocalAdminsOnly: get("local_logins_admins_only") == "1", WebhookAllowHosts: get("webhook_allow_hosts"),
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
