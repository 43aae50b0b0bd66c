package store

// Keys of the stored settings, edited on the Settings page.
const (
	SettingHealthInterval     = "health_interval"      // Go duration
	SettingHealthTimeout      = "health_timeout"       // Go duration
	SettingMaxFailures        = "max_failures"         // integer
	SettingDefaultHTTPTimeout = "default_http_timeout" // Go duration, for tasks without a timeout
	SettingRunRetentionDays   = "run_retention_days"   // integer, 0 keeps runs forever
	SettingSMTPHost           = "smtp_host"
	SettingSMTPPort           = "smtp_port"
	SettingSMTPFrom           = "smtp_from"
	SettingSMTPUsername       = "smtp_username"
	SettingSMTPPassword       = "smtp_password"
	SettingSMTPTLS            = "smtp_tls" // none, starttls or tls
	SettingWebhookURL         = "webhook_url"
	SettingPublicURL          = "public_url" // the console's URL, for links in notifications
	// SettingApproveNodes: "true" makes new node names wait for an admin's approval.
	SettingApproveNodes = "approve_new_nodes"
	// SettingPruneOfflineAfter: Go duration after which an auto-registered
	// worker offline that long is deleted; 0 keeps them.
	SettingPruneOfflineAfter = "prune_offline_after"
	// SettingLocalAdminsOnly: "true" lets only cluster admins sign in with a
	// local password (break glass), everyone else through LDAP or OIDC.
	SettingLocalAdminsOnly   = "local_logins_admins_only"
	SettingWebhookAllowHosts = "webhook_allow_hosts" // hosts project webhooks may reach though loopback, link-local or the master
	// SettingTaskVersionsKept: integer, how many versions of each task are
	// kept (besides those its recent runs ran).
	SettingTaskVersionsKept = "task_versions_kept"
)

// SettingsVersion changes (to a fresh random value) at every save of the
// settings, in the same transaction: every master polls it and reloads the
// settings when it differs from the version it loaded.
const SettingsVersion = "settings_version"

// SettingClusterKey is the stored cluster key, generated on the first start;
// it is not on the Settings page.
const SettingClusterKey = "cluster_key"
