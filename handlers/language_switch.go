package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// languageCookieAge keeps a reader's choice for a year.
const languageCookieAge = 365 * 24 * 3600

// localize puts the reader's localizer in the request's context: the
// switch's cookie, else Accept-Language. requireUser replaces it when the
// signed-in user chose a language on the account page.
func (s *server) localize(c *gin.Context) {
	s.setLocalizer(c, locale.Negotiate("", cookieOf(c), c.GetHeader("Accept-Language")))
	c.Next()
}

// setLocalizer makes lang the language of the rest of the request.
func (s *server) setLocalizer(c *gin.Context, lang string) {
	l := locale.New(lang, s.missingMessage)
	c.Request = c.Request.WithContext(locale.With(c.Request.Context(), l))
}

// missingMessage logs a message a catalog lacks (the page shows English).
func (s *server) missingMessage(lang, id string) {
	s.log.Warn("message missing from catalog", "lang", lang, "id", id)
}

// switchLanguage is the language switch of every page: it sets the cookie
// and, for a signed-in user who chose a language before, that choice too
// (it would win over the cookie), then returns to the page (a local path).
func (s *server) switchLanguage(c *gin.Context) {
	lang := c.PostForm("lang")
	back := safeNext(c.PostForm("back"))
	if lang != locale.EN && lang != locale.ZH {
		c.Redirect(http.StatusSeeOther, back)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: locale.CookieName, Value: lang, Path: "/", MaxAge: languageCookieAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	if p, err := s.authenticate(c); err == nil && p != nil && p.Token == "" && p.Locale != "" && p.Locale != lang {
		if err := s.m.Accounts().ChangeOwnLocale(c.Request.Context(), p.Name, lang); err != nil {
			s.log.Warn("language switch: keep the user's choice", "username", p.Name, "err", err)
		}
	}
	c.Redirect(http.StatusSeeOther, back)
}

// lc is the request's localizer.
func lc(c *gin.Context) *locale.Localizer { return locale.From(c.Request.Context()) }

// tr renders a catalog message in the reader's language.
func tr(c *gin.Context, id string, kv ...any) string { return lc(c).T(id, kv...) }

// refusal is the sentence of an engine refusal for a page, in the reader's
// language where the catalogs know it (the API keeps master.Message).
func refusal(c *gin.Context, err error) string {
	return views.Refusal(c.Request.Context(), master.Message(err))
}

// taskStatusIDs are the messages naming a task's status.
var taskStatusIDs = map[string]string{"stopped": "TaskStatusStopped", "running": "StatusRunningLower", "paused": "TaskStatusPaused"}

// resultIDs are the messages naming a run's result.
var resultIDs = map[string]string{"success": "ResultSuccess", "failed": "ResultFailed", "timeout": "ResultTimeout",
	"skipped": "ResultSkipped", "killed": "ResultKilled", "lost": "ResultLost", "running": "StatusRunningLower"}

// cookieOf is the language the switch's cookie holds, "" if none.
func cookieOf(c *gin.Context) string {
	v, _ := c.Cookie(locale.CookieName)
	return v
}
