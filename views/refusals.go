package views

import (
	"context"
	"regexp"

	"github.com/schedulemaster-go/schedulemaster/locale"
)

// refusalText is one engine sentence the console says in the reader's
// language: the pattern of the English sentence and the message whose
// placeholders (Names, in order) take its groups.
type refusalText struct {
	re    *regexp.Regexp
	id    string
	names []string
}

// refusalTexts are the engine's refusals and field errors people meet most
// on pages. A sentence not listed stays as the engine wrote it (English).
var refusalTexts = []refusalText{
	{regexp.MustCompile(`^is required$`), "RefRequired", nil},
	{regexp.MustCompile(`^must be a whole number$`), "RefWholeNumber", nil},
	{regexp.MustCompile(`^is in the past$`), "RefInPast", nil},
	{regexp.MustCompile(`^does not match the password$`), "RefNoMatchPassword", nil},
	{regexp.MustCompile(`^does not match the new password$`), "RefNoMatchNewPassword", nil},
	{regexp.MustCompile(`^is already taken$`), "RefTaken", nil},
	{regexp.MustCompile(`^is wrong$`), "RefWrong", nil},
	{regexp.MustCompile(`^must differ from the current password$`), "RefDiffer", nil},
	{regexp.MustCompile(`^must be a Go duration such as 10s, 1m30s or 500ms$`), "RefGoDuration", nil},
	{regexp.MustCompile(`^must be http or https$`), "RefHTTPOrHTTPS", nil},
	{regexp.MustCompile(`^must be after start_at$`), "RefAfterStart", nil},
	{regexp.MustCompile(`^is required for an http task$`), "RefRequiredHTTP", nil},
	{regexp.MustCompile(`^is required for a shell task$`), "RefRequiredShell", nil},
	{regexp.MustCompile(`^is required for a cron schedule$`), "RefRequiredCron", nil},
	{regexp.MustCompile(`^is required for a one-time schedule$`), "RefRequiredOnce", nil},
	{regexp.MustCompile(`^must be host:port, e\.g\. 10\.0\.0\.5:30001$`), "RefHostPort", nil},
	{regexp.MustCompile(`^task (\S+) does not exist$`), "RefTaskNotFound", []string{"ID"}},
	{regexp.MustCompile(`^run (\S+) does not exist$`), "RefRunNotFound", []string{"ID"}},
	{regexp.MustCompile(`^there is no node (\S+)$`), "RefNodeNotFound", []string{"Name"}},
	{regexp.MustCompile(`^node "([^"]+)" does not exist$`), "RefNodeNotExist", []string{"Name"}},
	{regexp.MustCompile(`^there is no user (\S+)$`), "RefUserNotFound", []string{"Name"}},
	{regexp.MustCompile(`^project (\S+) not found$`), "RefProjectNotFound", []string{"Name"}},
	{regexp.MustCompile(`^pool (\S+) has no member, no task and no approval$`), "RefPoolEmpty", []string{"Label"}},
	{regexp.MustCompile(`^the master is stopping$`), "RefStopping", nil},
	{regexp.MustCompile(`^wrong username or password$`), "RefWrongLogin", nil},
	{regexp.MustCompile(`^node (\S+) is running; disable it before deleting it$`), "RefNodeRunningDelete", []string{"Name"}},
	{regexp.MustCompile(`^task (.+) is (stopped|running|paused); stop it before editing$`), "RefTaskStopFirst", []string{"Title", "Status"}},
	{regexp.MustCompile(`^no running worker for this task \((.*)\)$`), "RefNoWorker", []string{"Why"}},
	{regexp.MustCompile(`^the database did not answer in time or refused the connection; retrying$`), "RefDBUnavailable", nil},
	{regexp.MustCompile(`^not found$`), "RefNotFound", nil},
	{regexp.MustCompile(`^forbidden$`), "RefForbidden", nil},
	{regexp.MustCompile(`^forbidden: only a cluster admin may change nodes, pools, users, settings or projects$`), "RefAdminOnly", nil},
	{regexp.MustCompile(`^forbidden: only cluster admins and viewers of every project may see this$`), "RefReaderOnly", nil},
	{regexp.MustCompile(`^forbidden: your role in project (\S+) may not do this$`), "RefRoleMayNot", []string{"Project"}},
	{regexp.MustCompile(`^forbidden: only a cluster admin adds nodes$`), "RefAdminAddsNodes", nil},
	{regexp.MustCompile(`^you cannot disable yourself; ask another admin$`), "RefDisableSelf", nil},
	{regexp.MustCompile(`^(\S+) is the only enabled admin; make another user admin first, so that someone can still change things$`), "RefLastAdmin", []string{"Name"}},
	{regexp.MustCompile(`^the default project cannot be deleted$`), "RefDefaultProject", nil},
}

// Refusal says an engine sentence (a refusal or a field error) in the
// reader's language when the catalogs know it, else as it is.
func Refusal(ctx context.Context, msg string) string { return RefusalIn(locale.From(ctx), msg) }

// RefusalIn is Refusal in the language of l.
func RefusalIn(l *locale.Localizer, msg string) string {
	if !l.Chinese() || msg == "" {
		return msg
	}
	for _, r := range refusalTexts {
		m := r.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		kv := make([]any, 0, 2*len(r.names))
		for i, n := range r.names {
			kv = append(kv, n, m[i+1])
		}
		return l.T(r.id, kv...)
	}
	return msg
}
