package views

import "context"

// SettingsForm holds the settings page's fields as typed (or as stored).
type SettingsForm struct {
	HealthInterval     string
	HealthTimeout      string
	MaxFailures        string
	DefaultHTTPTimeout string
	RunRetentionDays   string
	// TaskVersionsKept is how many versions of each task are kept.
	TaskVersionsKept string
	SMTPHost         string
	SMTPPort         string
	SMTPFrom         string
	SMTPUsername     string
	SMTPTLS          string // none, starttls or tls
	WebhookURL       string
	PublicURL        string
	ApproveNewNodes  bool
	// PruneOfflineAfter is how long an auto-registered worker may stay
	// offline before it is deleted ("24h", "7d", "0" for never).
	PruneOfflineAfter string
	// LocalAdminsOnly limits local passwords to cluster admins.
	LocalAdminsOnly bool
	// WebhookAllowHosts lists hosts project webhooks may reach though they
	// are inside (loopback, link-local, this master).
	WebhookAllowHosts string
}

// PinnedValue is a health setting fixed by the process configuration: the
// value in force and where it comes from.
type PinnedValue struct {
	InForce string // e.g. "1s"
	Flag    string // e.g. "--health-interval"
	Env     string // e.g. "SM_HEALTH_INTERVAL"
}

// NotifyResultRow is the outcome of one test notification channel.
type NotifyResultRow struct {
	Channel string // "email" or "webhook"
	Target  string
	OK      bool
	Message string
}

// SettingsVM is the settings page.
type SettingsVM struct {
	Layout  LayoutVM
	Flash   *Flash
	CanEdit bool
	Form    SettingsForm
	// PasswordSet says whether an SMTP password is stored; the password itself
	// is never rendered.
	PasswordSet bool
	// Pinned holds the pinned health settings by field name (health_interval,
	// health_timeout, max_failures).
	Pinned    map[string]PinnedValue
	Errors    map[string]string
	FormError string
	// Tested is set once the test button was pressed; Results are its outcomes.
	Tested  bool
	Results []NotifyResultRow
}

func (vm SettingsVM) pinned(field string) (PinnedValue, bool) {
	p, ok := vm.Pinned[field]
	return p, ok
}

func pinnedNote(ctx context.Context, p PinnedValue) string {
	return T(ctx, "SettingPinned", "Flag", p.Flag, "Env", p.Env)
}

func notifyChannel(ctx context.Context, ch string) string {
	switch ch {
	case "email":
		return T(ctx, "NotifyEmail")
	case "webhook":
		return "Webhook"
	}
	return ch
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
