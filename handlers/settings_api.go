package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// apiSettings is the cluster's settings as GET and PATCH /api/v1/settings
// answer them: the stored values (what a PATCH changes), durations as Go
// durations, the SMTP password never (only whether one is set), passwords
// in URLs masked (sending the mask back keeps them).
type apiSettings struct {
	HealthInterval        string `json:"health_interval"`
	HealthTimeout         string `json:"health_timeout"`
	MaxFailures           int    `json:"max_failures"`
	DefaultHTTPTimeout    string `json:"default_http_timeout"`
	RunRetentionDays      int    `json:"run_retention_days"`
	TaskVersionsKept      int    `json:"task_versions_kept"`
	PruneOfflineAfter     string `json:"prune_offline_after"`
	ApproveNewNodes       bool   `json:"approve_new_nodes"`
	LocalLoginsAdminsOnly bool   `json:"local_logins_admins_only"`
	SMTPHost              string `json:"smtp_host"`
	SMTPPort              int    `json:"smtp_port"`
	SMTPFrom              string `json:"smtp_from"`
	SMTPUsername          string `json:"smtp_username"`
	SMTPPasswordSet       bool   `json:"smtp_password_set"`
	SMTPTLS               string `json:"smtp_tls"`
	WebhookURL            string `json:"webhook_url"`
	PublicURL             string `json:"public_url"`
	WebhookAllowHosts     string `json:"webhook_allow_hosts"`
	// Pinned names the health values the master's flags or environment
	// set, with the value in force: they win over the stored one until the
	// master starts without them.
	Pinned map[string]string `json:"pinned,omitempty"`
}

// apiGetSettings answers GET /api/v1/settings (cluster admins).
func (s *server) apiGetSettings(c *gin.Context) {
	st, err := s.m.StoredSettings(c.Request.Context())
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.settingsAnswer(st))
}

// apiPatchSettings answers PATCH /api/v1/settings (cluster admins): the
// fields given change, validated with the rest as the console's form is;
// a bad value changes nothing (400 with the field named in "fields").
func (s *server) apiPatchSettings(c *gin.Context) {
	var b master.SettingsPatch
	if !bindJSON(c, &b) {
		return
	}
	change, fe := b.Change()
	if len(fe) > 0 {
		s.apiError(c, fe)
		return
	}
	ctx := c.Request.Context()
	if err := s.m.ChangeSettings(ctx, change); err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("settings saved", "user", currentUser(c).Name, "via", "api")
	st, err := s.m.StoredSettings(ctx)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.settingsAnswer(st))
}

// settingsAnswer shows stored settings as the API answers them.
func (s *server) settingsAnswer(st master.Settings) apiSettings {
	f := settingsForm(st)
	a := apiSettings{HealthInterval: f.HealthInterval, HealthTimeout: f.HealthTimeout, MaxFailures: st.MaxFailures,
		DefaultHTTPTimeout: f.DefaultHTTPTimeout, RunRetentionDays: st.RunRetentionDays, TaskVersionsKept: st.TaskVersionsKept, PruneOfflineAfter: st.PruneOfflineAfter.String(),
		ApproveNewNodes: st.ApproveNewNodes, LocalLoginsAdminsOnly: st.LocalAdminsOnly, SMTPHost: st.SMTPHost, SMTPPort: st.SMTPPort,
		SMTPFrom: st.SMTPFrom, SMTPUsername: st.SMTPUsername, SMTPPasswordSet: st.SMTPPassword != "", SMTPTLS: st.SMTPTLS,
		WebhookURL: f.WebhookURL, PublicURL: f.PublicURL, WebhookAllowHosts: st.WebhookAllowHosts}
	inForce, pinned := s.m.Settings()
	for _, p := range []struct {
		on         bool
		field, val string
	}{
		{pinned.HealthInterval, "health_interval", inForce.HealthInterval.String()},
		{pinned.HealthTimeout, "health_timeout", inForce.HealthTimeout.String()},
		{pinned.MaxFailures, "max_failures", settingsInt(inForce.MaxFailures)},
	} {
		if p.on {
			if a.Pinned == nil {
				a.Pinned = map[string]string{}
			}
			a.Pinned[p.field] = p.val
		}
	}
	return a
}

func settingsInt(n int) string { return strconv.Itoa(n) }
