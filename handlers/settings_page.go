package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showSettings shows the settings in force. Everyone may look; only admins get
// the Save and Test buttons. The SMTP password is never rendered back.
func (s *server) showSettings(c *gin.Context) {
	vm, err := s.settingsVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.SettingsPage(vm))
}

// saveSettings validates and stores the form (admin). A bad field shows the
// form again with inline errors (422) and stores nothing; success applies the
// settings at once and redirects with a flash.
func (s *server) saveSettings(c *gin.Context) {
	ctx := c.Request.Context()
	vm, err := s.settingsVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	cur, pinned := s.m.Settings()
	v := postForm(c)
	stored, err := s.m.StoredSettings(ctx)
	if err != nil {
		s.serverError(c, err)
		return
	}
	form.SettingsKeepOmitted(v, settingsForm(stored))
	var next master.Settings
	var fe protocol.FieldErrors
	vm.Form, next, fe = form.Settings(v)
	// An empty password field keeps the stored password, unless asked to remove it.
	next.SMTPPassword = form.SMTPPassword(v, cur.SMTPPassword)
	if err := next.Validate(); err != nil {
		master.Merge(fe, err)
	}
	if len(fe) == 0 {
		err := s.m.UpdateSettings(ctx, next)
		if err == nil {
			s.log.Info("settings saved", "user", currentUser(c).Name)
			msg := tr(c, "FlashSettingsSaved")
			if pinned.HealthInterval || pinned.HealthTimeout || pinned.MaxFailures {
				msg = tr(c, "FlashSettingsSavedPinned")
			}
			s.setFlash(c, true, msg)
			c.Redirect(http.StatusSeeOther, "/settings")
			return
		}
		var all protocol.FieldErrors
		if !errors.As(err, &all) {
			s.serverError(c, err)
			return
		}
		fe = all
	}
	vm.Errors = fe
	s.render(c, http.StatusUnprocessableEntity, views.SettingsPage(vm))
}

// testNotifications sends a test e-mail to the admin's address and a test
// webhook with the saved settings, and shows each channel's outcome: as a
// fragment for htmx, else on the whole page.
func (s *server) testNotifications(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Minute)
	defer cancel()
	email := ""
	if p := currentUser(c); p != nil {
		u, err := s.m.Accounts().GetUser(ctx, p.Name)
		switch {
		case err == nil:
			email = u.Email
		case master.KindOf(err) != master.KindNotFound:
			s.serverError(c, err)
			return
		}
	}
	results := s.m.TestNotifications(ctx, email)
	rows := make([]views.NotifyResultRow, 0, len(results))
	for _, r := range results {
		rows = append(rows, views.NotifyResultRow{Channel: r.Channel, Target: r.Target, OK: r.OK, Message: r.Message})
		s.log.Info("test notification", "user", currentUser(c).Name, "channel", r.Channel, "to", r.Target, "ok", r.OK, "message", r.Message)
	}
	if isHX(c) {
		s.render(c, http.StatusOK, views.NotifyResults(true, rows))
		return
	}
	vm, err := s.settingsVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Tested, vm.Results = true, rows
	s.render(c, http.StatusOK, views.SettingsPage(vm))
}

// settingsPinnedSources names where each pinned health value comes from.
var settingsPinnedSources = map[string]views.PinnedValue{
	"health_interval": {Flag: "--health-interval", Env: "SM_HEALTH_INTERVAL"},
	"health_timeout":  {Flag: "--health-timeout", Env: "SM_HEALTH_TIMEOUT"},
	"max_failures":    {Flag: "--max-failures", Env: "SM_MAX_FAILURES"},
}

// settingsVM fills the page with the settings in force. For a pinned health
// value the form shows the stored value (what a restart without the flag
// would use) and the value in force separately.
func (s *server) settingsVM(c *gin.Context) (views.SettingsVM, error) {
	ctx := c.Request.Context()
	cur, pinned := s.m.Settings()
	l := s.layout(c, tr(c, "NavSettings"), "settings")
	vm := views.SettingsVM{Layout: l, CanEdit: l.Admin, PasswordSet: cur.SMTPPassword != "", Form: settingsForm(cur),
		Pinned: map[string]views.PinnedValue{}}
	if !l.Admin {
		// Where notifications go, and as whom, is for admins only: a webhook
		// URL often holds a token, and SMTP settings name an account.
		vm.Form.SMTPHost, vm.Form.SMTPPort, vm.Form.SMTPFrom, vm.Form.SMTPUsername = "", "", "", ""
		vm.Form.SMTPTLS, vm.Form.WebhookURL, vm.PasswordSet = "", "", false
	}
	def := master.DefaultSettings()
	for _, p := range []struct {
		on            bool
		field, key    string
		inForce, dflt string
		dst           *string
		duration      bool
	}{
		{pinned.HealthInterval, "health_interval", master.SettingHealthInterval, cur.HealthInterval.String(), def.HealthInterval.String(), &vm.Form.HealthInterval, true},
		{pinned.HealthTimeout, "health_timeout", master.SettingHealthTimeout, cur.HealthTimeout.String(), def.HealthTimeout.String(), &vm.Form.HealthTimeout, true},
		{pinned.MaxFailures, "max_failures", master.SettingMaxFailures, strconv.Itoa(cur.MaxFailures), strconv.Itoa(def.MaxFailures), &vm.Form.MaxFailures, false},
	} {
		if !p.on {
			continue
		}
		src := settingsPinnedSources[p.field]
		src.InForce = p.inForce
		vm.Pinned[p.field] = src
		v, stored, err := s.m.Reads().StoredSetting(ctx, p.key)
		switch {
		case err == nil && !stored:
			v = p.dflt
		case err != nil:
			return vm, err
		case p.duration:
			v = settingsDuration(v)
		}
		*p.dst = v
	}
	return vm, nil
}

// settingsDuration shows a stored duration the way the engine reads it (a
// bare number is seconds); a value that does not parse is shown as stored.
func settingsDuration(v string) string {
	if d, err := time.ParseDuration(v); err == nil {
		return d.String()
	}
	if n, err := strconv.Atoi(v); err == nil {
		return (time.Duration(n) * time.Second).String()
	}
	return v
}

func settingsForm(st master.Settings) views.SettingsForm {
	return views.SettingsForm{
		HealthInterval: st.HealthInterval.String(), HealthTimeout: st.HealthTimeout.String(), MaxFailures: strconv.Itoa(st.MaxFailures),
		DefaultHTTPTimeout: st.DefaultHTTPTimeout.String(), RunRetentionDays: strconv.Itoa(st.RunRetentionDays),
		TaskVersionsKept: strconv.Itoa(st.TaskVersionsKept),
		SMTPHost:         st.SMTPHost, SMTPPort: strconv.Itoa(st.SMTPPort), SMTPFrom: st.SMTPFrom, SMTPUsername: st.SMTPUsername,
		// Passwords in URLs are masked; saving the mask keeps them.
		SMTPTLS: st.SMTPTLS, WebhookURL: master.MaskURL(st.WebhookURL), PublicURL: master.MaskURL(st.PublicURL),
		ApproveNewNodes: st.ApproveNewNodes, PruneOfflineAfter: master.FormatDays(st.PruneOfflineAfter),
		LocalAdminsOnly: st.LocalAdminsOnly, WebhookAllowHosts: st.WebhookAllowHosts,
	}
}
