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
		TaskVersionsKept: get("task_versions_kept"),
		SMTPHost:         get("smtp_host"), SMTPPort: get("smtp_port"), SMTPFrom: get("smtp_from"), SMTPUsername: get("smtp_username"),
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
	num("task_versions_kept", f.TaskVersionsKept, &st.TaskVersionsKept)
	if d, ok := master.ParseDays(f.PruneOfflineAfter); ok {
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
		"task_versions_kept": stored.TaskVersionsKept,
		"smtp_host":          stored.SMTPHost, "smtp_port": stored.SMTPPort, "smtp_from": stored.SMTPFrom, "smtp_username": stored.SMTPUsername,
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
