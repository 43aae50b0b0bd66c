package views

import (
	"context"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

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

// refusalTexts are the engine's refusals and field errors people meet on
// pages: one pattern per sentence the engine writes (master/, protocol/,
// handlers/form). The first pattern that matches wins, so a narrower
// sentence comes before a wider one (is longer than N characters before is
// longer than D). A sentence not listed stays as the engine wrote it
// (English).
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
	{regexp.MustCompile(`^task (\S+) changed since version (\d+): (.+) saved version (\d+) at (\S+); reload it and make your change again$`), "RefTaskMoved", []string{"ID", "From", "Who", "Version", "At"}},
	{regexp.MustCompile(`^no running worker for this task \((.+)\)$`), "RefNoWorker", []string{"Why"}},
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
	{regexp.MustCompile(`^is longer than (\d+) characters$`), "RefLongerChars", []string{"N"}},
	{regexp.MustCompile(`^is longer than (\d+) bytes$`), "RefLongerBytes", []string{"N"}},
	{regexp.MustCompile(`^must be 1 to 100 letters, digits, '\.', '_' or '-', starting with a letter or digit$`), "RefTaskKey", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a valid cron expression \(5 fields, or 6 with leading seconds\): (.+)$`), "RefCronInvalidFields", []string{"Value", "Msg"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a valid cron expression: (.+)$`), "RefCronInvalid", []string{"Value", "Msg"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) (\d+) is outside (\d+)-(\d+)$`), "RefCronOutside", []string{"Field", "Value", "Lo", "Hi"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) "((?:[^"\\]|\\.)*)" is not a number or a name like (\S+)$`), "RefCronNotNumberOrName", []string{"Field", "Value", "Example"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) "((?:[^"\\]|\\.)*)" is not a number$`), "RefCronNotNumber", []string{"Field", "Value"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) range (\d+)-(\d+) runs backwards$`), "RefCronBackwards", []string{"Field", "Lo", "Hi"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) step "((?:[^"\\]|\\.)*)" must be a whole number of at least 1$`), "RefCronStep", []string{"Field", "Value"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) has an empty item between commas$`), "RefCronEmptyItem", []string{"Field"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) "((?:[^"\\]|\\.)*)" has more than one "(/|-)"$`), "RefCronTooMany", []string{"Field", "Value", "Sep"}},
	{regexp.MustCompile(`^has (\d+) fields?; a cron expression has 5 \(minute hour day-of-month month day-of-week\), or 6 with leading seconds$`), "RefCronFieldCount", []string{"N"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a shorthand cron knows: use @yearly, @monthly, @weekly, @daily, @hourly or @every with a duration$`), "RefCronDescriptor", []string{"Value"}},
	{regexp.MustCompile(`^(second|minute|hour|day of month|month|day of week) "((?:[^"\\]|\\.)*)": (.+)$`), "RefCronHashed", []string{"Field", "Value", "Msg"}},
	{regexp.MustCompile(`^H\((\d+)-(\d+)\) is outside (\d+)-(\d+)$`), "RefHOutside", []string{"A", "B", "Lo", "Hi"}},
	{regexp.MustCompile(`^H\((\d+)-(\d+)\) runs backwards$`), "RefHBackwards", []string{"A", "B"}},
	{regexp.MustCompile(`^H/n needs a whole number n of at least 1$`), "RefHStep", nil},
	{regexp.MustCompile(`^the step (\d+) is longer than the range (\d+)-(\d+)$`), "RefHStepLonger", []string{"Step", "Lo", "Hi"}},
	{regexp.MustCompile(`^H must be H, H\(a-b\), H/n or H\(a-b\)/n: missing \)$`), "RefHMissingParen", nil},
	{regexp.MustCompile(`^H must be H, H\(a-b\), H/n or H\(a-b\)/n: H\(a-b\) needs a range like H\(0-29\)$`), "RefHNeedsRange", nil},
	{regexp.MustCompile(`^H must be H, H\(a-b\), H/n or H\(a-b\)/n$`), "RefHForms", nil},
	{regexp.MustCompile(`^H\(a-b\) needs whole numbers$`), "RefHWholeNumbers", nil},
	{regexp.MustCompile(`^H needs 5 fields, or 6 with leading seconds \(got (\d+)\)$`), "RefHFields", []string{"N"}},
	{regexp.MustCompile(`^second$`), "RefCronSecond", nil},
	{regexp.MustCompile(`^minute$`), "RefCronMinute", nil},
	{regexp.MustCompile(`^hour$`), "RefCronHour", nil},
	{regexp.MustCompile(`^day of month$`), "RefCronDayOfMonth", nil},
	{regexp.MustCompile(`^month$`), "RefCronMonth", nil},
	{regexp.MustCompile(`^day of week$`), "RefCronDayOfWeek", nil},
	{regexp.MustCompile(`^time zone prefixes are not supported; set the task's timezone field instead$`), "RefCronTZPrefix", nil},
	{regexp.MustCompile(`^@every needs a duration like 30s or 5m$`), "RefEveryNeeds", nil},
	{regexp.MustCompile(`^@every (.+)$`), "RefEveryMsg", []string{"Msg"}},
	{regexp.MustCompile(`^never fires in the next (\d+) years$`), "RefNeverFiresYears", []string{"N"}},
	{regexp.MustCompile(`^never fires between start_at and end_at$`), "RefNeverFiresWindow", nil},
	{regexp.MustCompile(`^never fires between start_at and end_at: the first fire would be (.+)$`), "RefNeverFiresFirst", []string{"At"}},
	{regexp.MustCompile(`^is before start_at: it would never fire$`), "RefAtBeforeStart", nil},
	{regexp.MustCompile(`^is after end_at: it would never fire$`), "RefAtAfterEnd", nil},
	{regexp.MustCompile(`^is required: cron, interval or once$`), "RefKindRequired", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not cron, interval or once$`), "RefKindInvalid", []string{"Value"}},
	{regexp.MustCompile(`^applies to interval schedules only \(a cron schedule spreads with H, like H \* \* \* \*\)$`), "RefAlignCron", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not spread or epoch$`), "RefAlignInvalid", []string{"Value"}},
	{regexp.MustCompile(`^must be more than 0 and at most (\d+) days$`), "RefTimeoutDays", []string{"N"}},
	{regexp.MustCompile(`^must be more than 0 and at most (\S+)$`), "RefMoreThanZeroAtMost", []string{"Max"}},
	{regexp.MustCompile(`^must be at least 100ms$`), "RefAtLeast100ms", nil},
	{regexp.MustCompile(`^must be from 0 \(keep forever\) to (\d+)$`), "RefFromKeepForever", []string{"Max"}},
	{regexp.MustCompile(`^must be 0 \(never\) or from (\S+) to (\S+)$`), "RefFromNever", []string{"Min", "Max"}},
	{regexp.MustCompile(`^must be a whole number from (\S+) to (\S+)$`), "RefWholeFromTo", []string{"Min", "Max"}},
	{regexp.MustCompile(`^must be from (\S+) to (\S+)$`), "RefFromTo", []string{"Min", "Max"}},
	{regexp.MustCompile(`^at most (\d+) parameters$`), "RefAtMostParams", []string{"N"}},
	{regexp.MustCompile(`^key "((?:[^"\\]|\\.)*)" must be letters, digits and \'_\', not starting with a digit$`), "RefParamKey", []string{"Name"}},
	{regexp.MustCompile(`^value of "((?:[^"\\]|\\.)*)" is longer than (\d+) bytes$`), "RefValueLongerBytes", []string{"Name", "N"}},
	{regexp.MustCompile(`^must be empty for an http task$`), "RefEmptyForHTTP", nil},
	{regexp.MustCompile(`^must be empty for a shell task$`), "RefEmptyForShell", nil},
	{regexp.MustCompile(`^is required: http or shell$`), "RefTypeRequired", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not http or shell$`), "RefTypeInvalid", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not allow, skip or queue$`), "RefOverlapInvalid", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not skip or run_once$`), "RefMisfireInvalid", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not wait or skip$`), "RefAtCapacityInvalid", []string{"Value"}},
	{regexp.MustCompile(`^must name a param: hash routing uses its value$`), "RefRoutingKey", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not weighted, round_robin, failover, least_busy, hash or broadcast$`), "RefRoutingInvalid", []string{"Value"}},
	{regexp.MustCompile(`^holds a NUL byte or invalid UTF-8$`), "RefNULOrUTF8", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS$`), "RefMethodInvalid", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not an absolute http\(s\) URL$`), "RefNotAbsoluteURL", []string{"Value"}},
	{regexp.MustCompile(`^holds a space, line break or NUL once (\{\{KEY\}\}) parameters are substituted$`), "RefURLSpaceOnceSubst", []string{"Placeholder"}},
	{regexp.MustCompile(`^is not a valid URL once (\{\{KEY\}\}) parameters are substituted$`), "RefURLInvalidOnceSubst", []string{"Placeholder"}},
	{regexp.MustCompile(`^at most (\d+) headers$`), "RefAtMostHeaders", []string{"N"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a valid header name$`), "RefHeaderName", []string{"Name"}},
	{regexp.MustCompile(`^value of "((?:[^"\\]|\\.)*)" is longer than (\d+) KiB$`), "RefValueLongerKiB", []string{"Name", "N"}},
	{regexp.MustCompile(`^value of "((?:[^"\\]|\\.)*)" has a line break or NUL once (\{\{KEY\}\}) parameters are substituted$`), "RefValueLineBreakOnceSubst", []string{"Name", "Placeholder"}},
	{regexp.MustCompile(`^value of "((?:[^"\\]|\\.)*)" has a line break or NUL$`), "RefValueLineBreak", []string{"Name"}},
	{regexp.MustCompile(`^is larger than (\d+) KiB$`), "RefLargerKiB", []string{"N"}},
	{regexp.MustCompile(`^has a line break or NUL$`), "RefLineBreak", nil},
	{regexp.MustCompile(`^command and args are larger than (\d+) KiB$`), "RefCommandLarge", []string{"N"}},
	{regexp.MustCompile(`^at most (\d+) variables$`), "RefAtMostVariables", []string{"N"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a valid variable name$`), "RefVariableName", []string{"Name"}},
	{regexp.MustCompile(`^must be more than 0$`), "RefMoreThanZero", nil},
	{regexp.MustCompile(`^is shorter than (\S+): sub-second intervals cannot run as written$`), "RefIntervalShort", []string{"Min"}},
	{regexp.MustCompile(`^must be a whole number of seconds$`), "RefWholeSeconds", nil},
	{regexp.MustCompile(`^is longer than (\S+)$`), "RefLongerThan", []string{"Max"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not allowed: name an IANA zone like Europe/Berlin$`), "RefTZNotAllowed", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not an IANA time zone like Europe/Berlin or America/New_York$`), "RefTZInvalid", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a duration like 2s, 5m or 1h$`), "RefNotDurationSchedule", []string{"Value"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a duration like 30s or 5m$`), "RefNotDurationTimeout", []string{"Value"}},
	{regexp.MustCompile(`^must be 0 \(never\), a number of days such as 7d, or a Go duration such as 24h or 36h$`), "RefPruneForm", nil},
	{regexp.MustCompile(`^label "((?:[^"\\]|\\.)*)": (.+)$`), "RefLabel", []string{"Label", "Msg"}},
	{regexp.MustCompile(`^labels are longer than (\d+) bytes$`), "RefLabelsLonger", []string{"N"}},
	{regexp.MustCompile(`^key "((?:[^"\\]|\\.)*)" is given twice$`), "RefKeyTwice", []string{"Name"}},
	{regexp.MustCompile(`^more than (\d+) labels$`), "RefMoreLabels", []string{"N"}},
	{regexp.MustCompile(`^(\d+) labels, more than (\d+)$`), "RefLabelsCount", []string{"Count", "N"}},
	{regexp.MustCompile(`^key is empty$`), "RefKeyEmpty", nil},
	{regexp.MustCompile(`^key is longer than (\d+) characters$`), "RefKeyLonger", []string{"N"}},
	{regexp.MustCompile(`^key prefix "((?:[^"\\]|\\.)*)" must be a DNS subdomain \(lowercase letters, digits, \'-\' and \'\.\', e\.g\. example\.com\) followed by \'/\'$`), "RefKeyPrefix", []string{"Prefix"}},
	{regexp.MustCompile(`^key must be letters, digits, '-', '_' and '\.', starting and ending with a letter or digit$`), "RefKeyChars", nil},
	{regexp.MustCompile(`^key name after the prefix must be letters, digits, '-', '_' and '\.', starting and ending with a letter or digit$`), "RefKeyNameChars", nil},
	{regexp.MustCompile(`^value is longer than (\d+) characters$`), "RefValueLonger", []string{"N"}},
	{regexp.MustCompile(`^value must be empty or letters, digits, '-', '_' and '\.', starting and ending with a letter or digit$`), "RefValueChars", nil},
	{regexp.MustCompile(`^selector (".*"): at character (\d+): (.+)$`), "RefSelector", []string{"Selector", "Pos", "Msg"}},
	{regexp.MustCompile(`^longer than (\d+) bytes$`), "RefSelectorLonger", []string{"N"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is the key of task (\S+) already$`), "RefKeyOwned", []string{"Key", "Task"}},
	{regexp.MustCompile(`^unknown node "((?:[^"\\]|\\.)*)"$`), "RefUnknownNode", []string{"Name"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is the master, not a worker$`), "RefExecutorTheMaster", []string{"Name"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is a master, not a worker$`), "RefExecutorAMaster", []string{"Name"}},
	{regexp.MustCompile(`^at most (\d+) executors$`), "RefAtMostExecutors", []string{"N"}},
	{regexp.MustCompile(`^at most (\d+) keepers$`), "RefAtMostKeepers", []string{"N"}},
	{regexp.MustCompile(`^no running worker allows shell tasks \((.+) was started without --allow-shell\): start one with --allow-shell$`), "RefNoShellWorkerOne", []string{"Names"}},
	{regexp.MustCompile(`^no running worker allows shell tasks \((.+) were started without --allow-shell\): start one with --allow-shell$`), "RefNoShellWorkerMany", []string{"Names"}},
	{regexp.MustCompile(`^no executor allows shell tasks: (.+) was started without --allow-shell; restart it with --allow-shell or choose a worker that was$`), "RefNoShellExecutorOne", []string{"Names"}},
	{regexp.MustCompile(`^no executor allows shell tasks: (.+) were started without --allow-shell; restart one of them with --allow-shell or choose a worker that was$`), "RefNoShellExecutorMany", []string{"Names"}},
	{regexp.MustCompile(`^no running worker to assign: name the executors, or connect and enable a worker first$`), "RefNoWorkerToAssign", nil},
	{regexp.MustCompile(`^no running worker in what project (\S+) may run on \((.+)\): name the executors, or start a worker in one of those pools$`), "RefNoWorkerInPools", []string{"Project", "Pools"}},
	{regexp.MustCompile(`^pools (.+)$`), "RefPoolsList", []string{"List"}},
	{regexp.MustCompile(`^no pool: a cluster admin has allowed it none$`), "RefNoPoolAllowed", nil},
	{regexp.MustCompile(`^selector (.+) may select workers outside what project (\S+) may run on \((.+)\); add one of those pools' requirements to the selector, or ask a cluster admin to allow the pool$`), "RefSelectorOutside", []string{"Selector", "Project", "Pools"}},
	{regexp.MustCompile(`^node (\S+) is outside what project (\S+) may run on \((.+)\)$`), "RefNodeOutside", []string{"Name", "Project", "Pools"}},
	{regexp.MustCompile(`^project (\S+) may run only on (.+): give a selector within them, or executors$`), "RefProjectRunsOnlyOn", []string{"Project", "Pools"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a user who may read this project$`), "RefKeeperNotReader", []string{"Name"}},
	{regexp.MustCompile(`^a task cannot be its own child$`), "RefOwnChild", nil},
	{regexp.MustCompile(`^unknown task "((?:[^"\\]|\\.)*)"$`), "RefUnknownTask", []string{"ID"}},
	{regexp.MustCompile(`^these children form a cycle: (.+)$`), "RefChildCycle", []string{"Cycle"}},
	{regexp.MustCompile(`^is not valid JSON \(content_type is application/json\)$`), "RefNotJSONBody", nil},
	{regexp.MustCompile(`^is not a valid URL-encoded form \(content_type is application/x-www-form-urlencoded\)$`), "RefNotFormBody", nil},
	{regexp.MustCompile(`^cannot be sent as a header: (.+)$`), "RefNotAHeader", []string{"Msg"}},
	{regexp.MustCompile(`^give either delay or at, not both$`), "RefDelayOrAt", nil},
	{regexp.MustCompile(`^is required unless at is given: a duration like "30m" or a number of seconds$`), "RefDelayRequired", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not an RFC 3339 time like 2026-05-01T12:00:00Z$`), "RefNotRFC3339", []string{"Value"}},
	{regexp.MustCompile(`^is more than (\d+) days ahead$`), "RefDaysAhead", []string{"N"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a duration like "30m" or a number of seconds$`), "RefNotDelay", []string{"Value"}},
	{regexp.MustCompile(`^holds a space, line break or NUL$`), "RefSpaceLineNUL", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not application/json or application/x-www-form-urlencoded$`), "RefContentTypeInvalid", []string{"Value"}},
	{regexp.MustCompile(`^delayed task (\S+) does not exist$`), "RefDelayedNotFound", []string{"ID"}},
	{regexp.MustCompile(`^delayed task (\S+) is due and on its way to worker (\S+); it can no longer be cancelled$`), "RefDelayedOnItsWay", []string{"ID", "Node"}},
	{regexp.MustCompile(`^delayed task (\S+) is cancelled already$`), "RefDelayedCancelledAlready", []string{"ID"}},
	{regexp.MustCompile(`^delayed task (\S+) has finished \((\S+)\); only a pending task can be cancelled$`), "RefDelayedFinished", []string{"ID", "Status"}},
	{regexp.MustCompile(`^status must be one of (.+)$`), "RefStatusOneOf", []string{"List"}},
	{regexp.MustCompile(`^result must be one of (.+)$`), "RefResultOneOf", []string{"List"}},
	{regexp.MustCompile(`^is the master's own name$`), "RefMasterOwnName", nil},
	{regexp.MustCompile(`^is already taken by another node$`), "RefTakenByNode", nil},
	{regexp.MustCompile(`^a node named "((?:[^"\\]|\\.)*)" already exists$`), "RefNodeExists", []string{"Name"}},
	{regexp.MustCompile(`^node "((?:[^"\\]|\\.)*)" changed state meanwhile; reload and retry$`), "RefNodeChanged", []string{"Name"}},
	{regexp.MustCompile(`^the master's own node cannot be edited$`), "RefMasterNodeNoEdit", nil},
	{regexp.MustCompile(`^(\S+) is the master; it cannot be connected$`), "RefMasterCannotConnect", []string{"Name"}},
	{regexp.MustCompile(`^(\S+) is the master; it cannot be enabled$`), "RefMasterCannotEnable", []string{"Name"}},
	{regexp.MustCompile(`^(\S+) is the master; it cannot be disabled$`), "RefMasterCannotDisable", []string{"Name"}},
	{regexp.MustCompile(`^(\S+) is the master; it cannot be deleted$`), "RefMasterCannotDelete", []string{"Name"}},
	{regexp.MustCompile(`^node (\S+) waits for an admin's approval; approve it first$`), "RefNodeAwaitsApproval", []string{"Name"}},
	{regexp.MustCompile(`^(\d+) nodes already wait for approval \(the maximum\); an admin must approve or delete some first$`), "RefTooManyPending", []string{"N"}},
	{regexp.MustCompile(`^(\S+) is a master; only workers have labels$`), "RefMasterNoLabels", []string{"Name"}},
	{regexp.MustCompile(`^a pool is named key=value, for example pool=billing$`), "RefPoolNamed", nil},
	{regexp.MustCompile(`^a pool is one label, key=value, for example pool=billing$`), "RefPoolOneLabel", nil},
	{regexp.MustCompile(`^pool (\S+) is not approved$`), "RefPoolNotApproved", []string{"Label"}},
	{regexp.MustCompile(`^pool key: (.+)$`), "RefPoolKey", []string{"Msg"}},
	{regexp.MustCompile(`^may only contain letters, digits, dot, underscore and hyphen$`), "RefUsernameChars", nil},
	{regexp.MustCompile(`^cannot be \. or \.\.$`), "RefNotDots", nil},
	{regexp.MustCompile(`^must be admin or viewer, not "((?:[^"\\]|\\.)*)"$`), "RefClusterRoleInvalid", []string{"Value"}},
	{regexp.MustCompile(`^is not a valid email address \(like ops@example\.com\)$`), "RefEmailInvalid", nil},
	{regexp.MustCompile(`^must be at least (\d+) characters$`), "RefAtLeastChars", []string{"N"}},
	{regexp.MustCompile(`^must be at most (\d+) bytes$`), "RefAtMostBytes", []string{"N"}},
	{regexp.MustCompile(`^user (\S+) already exists$`), "RefUserExists", []string{"Name"}},
	{regexp.MustCompile(`^forbidden: only cluster admins and viewers of every project read other users$`), "RefReadUsers", nil},
	{regexp.MustCompile(`^forbidden: only cluster admins and viewers list users$`), "RefListUsers", nil},
	{regexp.MustCompile(`^nothing to change: send role, disabled, password or email$`), "RefNothingToChange", nil},
	{regexp.MustCompile(`^(\S+) signs in with (\S+) and has no local password$`), "RefNoLocalPassword", []string{"Name", "Method"}},
	{regexp.MustCompile(`^you sign in with (\S+) and have no local password to change$`), "RefYouNoLocalPassword", []string{"Method"}},
	{regexp.MustCompile(`^the first admin's password (.+)$`), "RefFirstAdminPassword", []string{"Msg"}},
	{regexp.MustCompile(`^wrong username or password; local passwords are for cluster admins only: sign in with your organisation's account$`), "RefLocalPasswordsAdmins", nil},
	{regexp.MustCompile(`^sign-in method "((?:[^"\\]|\\.)*)" is not configured$`), "RefMethodNotConfigured", []string{"Method"}},
	{regexp.MustCompile(`^must be valid UTF-8 without NUL bytes$`), "RefUTF8NoNULBytes", nil},
	{regexp.MustCompile(`^must be valid UTF-8 without NUL$`), "RefUTF8NoNUL", nil},
	{regexp.MustCompile(`^must be in the future \(at least a minute from now\)$`), "RefExpiresFuture", nil},
	{regexp.MustCompile(`^must be at most 5 years from now$`), "RefExpiresFiveYears", nil},
	{regexp.MustCompile(`^must be one of owner, editor, operator, viewer, not "((?:[^"\\]|\\.)*)"$`), "RefProjectRoleInvalid", []string{"Value"}},
	{regexp.MustCompile(`^forbidden: you may create tokens only for yourself$`), "RefTokensForYourself", nil},
	{regexp.MustCompile(`^there is no user (\S+): a token acts as an existing user$`), "RefTokenNoUser", []string{"Name"}},
	{regexp.MustCompile(`^user (\S+) is disabled: its tokens would be refused$`), "RefTokenUserDisabled", []string{"Name"}},
	{regexp.MustCompile(`^forbidden: a token limited to one project cannot create a cluster token; name its project$`), "RefScopedNoClusterToken", nil},
	{regexp.MustCompile(`^there is no API token (\d+)$`), "RefTokenNotFound", []string{"ID"}},
	{regexp.MustCompile(`^the token “(.*)” was already revoked$`), "RefTokenRevokedAlready", []string{"Name"}},
	{regexp.MustCompile(`^(\S+)'s role in project (\S+) is (\S+): a token may not be given more$`), "RefTokenRoleTooHigh", []string{"Name", "Project", "Role"}},
	{regexp.MustCompile(`^a cluster token has its owner's role; name a project to give it a lower one$`), "RefClusterTokenRole", nil},
	{regexp.MustCompile(`^this API token is unknown or revoked$`), "RefTokenUnknown", nil},
	{regexp.MustCompile(`^this API token expired at (\S+); create a new one$`), "RefTokenExpired", []string{"At"}},
	{regexp.MustCompile(`^this API token's owner no longer exists$`), "RefTokenOwnerGone", nil},
	{regexp.MustCompile(`^this API token's owner is disabled$`), "RefTokenOwnerDisabled", nil},
	{regexp.MustCompile(`^must be 1 to 63 characters: lower-case letters, digits and '-', starting with a letter or digit$`), "RefProjectName", nil},
	{regexp.MustCompile(`^at most (\d+) pools$`), "RefAtMostPools", []string{"N"}},
	{regexp.MustCompile(`^pool "((?:[^"\\]|\\.)*)" selects nothing$`), "RefPoolSelectsNothing", []string{"Pool"}},
	{regexp.MustCompile(`^pool "((?:[^"\\]|\\.)*)": (.+)$`), "RefPoolError", []string{"Pool", "Msg"}},
	{regexp.MustCompile(`^a project named (\S+) exists already$`), "RefProjectExists", []string{"Name"}},
	{regexp.MustCompile(`^forbidden: only a cluster admin may change the pools a project may run on$`), "RefAdminProjectPools", nil},
	{regexp.MustCompile(`^project (\S+) still has tasks, delayed tasks or API tokens; delete or move them first$`), "RefProjectNotEmpty", []string{"Name"}},
	{regexp.MustCompile(`^(\S+) is not a member of project (\S+)$`), "RefNotMember", []string{"Name", "Project"}},
	{regexp.MustCompile(`^no user named "((?:[^"\\]|\\.)*)"$`), "RefNoUserNamed", []string{"Name"}},
	{regexp.MustCompile(`^at most (\d+) characters$`), "RefAtMostChars", []string{"N"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); cannot start it$`), "RefTaskCannotStart", []string{"ID", "Status"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); cannot stop it$`), "RefTaskCannotStop", []string{"ID", "Status"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); cannot pause it$`), "RefTaskCannotPause", []string{"ID", "Status"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); cannot resume it$`), "RefTaskCannotResume", []string{"ID", "Status"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); cannot run it$`), "RefTaskCannotRun", []string{"ID", "Status"}},
	{regexp.MustCompile(`^task (\S+) changed state meanwhile; reload and retry$`), "RefTaskChanged", []string{"ID"}},
	{regexp.MustCompile(`^task (\S+) is (\S+); no catch-up run$`), "RefNoCatchUp", []string{"ID", "Status"}},
	{regexp.MustCompile(`^no task selected: select at least one task$`), "RefNoTaskSelected", nil},
	{regexp.MustCompile(`^(\d+) tasks named: at most (\d+) at once$`), "RefBulkTooMany", []string{"Count", "N"}},
	{regexp.MustCompile(`^unknown action "((?:[^"\\]|\\.)*)": it must be one of (.+)$`), "RefBulkUnknownAction", []string{"Action", "List"}},
	{regexp.MustCompile(`^run (\S+) is not in progress: it ended as (\S+)$`), "RefRunNotInProgress", []string{"ID", "Result"}},
	{regexp.MustCompile(`^run (\S+) ran on node (\S+), which no longer exists$`), "RefRunNodeGone", []string{"ID", "Node"}},
	{regexp.MustCompile(`^run (\S+) has already ended on node (\S+); its result is on its way$`), "RefRunEndedOnWay", []string{"ID", "Node"}},
	{regexp.MustCompile(`^node (\S+) cannot kill runs \(an older version, or something else answers at (\S+)\)$`), "RefNodeCannotKill", []string{"Name", "Host"}},
	{regexp.MustCompile(`^forbidden: your role in this project \((\S+)\) may not read it$`), "RefRoleInProjectRead", []string{"Role"}},
	{regexp.MustCompile(`^forbidden: your role may not read it in any project$`), "RefRoleAnyProjectRead", nil},
	{regexp.MustCompile(`^forbidden: your role in this project \((\S+)\) may not start, stop, run, kill or cancel$`), "RefRoleInProjectOperate", []string{"Role"}},
	{regexp.MustCompile(`^forbidden: your role may not start, stop, run, kill or cancel in any project$`), "RefRoleAnyProjectOperate", nil},
	{regexp.MustCompile(`^forbidden: your role in this project \((\S+)\) may not create, change or delete tasks and delayed tasks$`), "RefRoleInProjectEdit", []string{"Role"}},
	{regexp.MustCompile(`^forbidden: your role may not create, change or delete tasks and delayed tasks in any project$`), "RefRoleAnyProjectEdit", nil},
	{regexp.MustCompile(`^forbidden: your role in this project \((\S+)\) may not see secrets$`), "RefRoleInProjectSecrets", []string{"Role"}},
	{regexp.MustCompile(`^forbidden: your role may not see secrets in any project$`), "RefRoleAnyProjectSecrets", nil},
	{regexp.MustCompile(`^forbidden: your role in this project \((\S+)\) may not manage members or tokens$`), "RefRoleInProjectManage", []string{"Role"}},
	{regexp.MustCompile(`^forbidden: your role may not manage members or tokens in any project$`), "RefRoleAnyProjectManage", nil},
	{regexp.MustCompile(`^must be shorter than the health interval$`), "RefShorterThanInterval", nil},
	{regexp.MustCompile(`^is not a valid host name or IP address$`), "RefHostNameInvalid", nil},
	{regexp.MustCompile(`^must be a plain e-mail address, e\.g\. scheduler@example\.com$`), "RefPlainEmail", nil},
	{regexp.MustCompile(`^must be none, starttls or tls$`), "RefSMTPTLS", nil},
	{regexp.MustCompile(`^is required with a username$`), "RefRequiredWithUsername", nil},
	{regexp.MustCompile(`^it is (\S+) — stop it first$`), "RefBulkStopFirst", []string{"Status"}},
	{regexp.MustCompile(`^it is already stopped$`), "RefBulkAlreadyStopped", nil},
	{regexp.MustCompile(`^it is already paused$`), "RefBulkAlreadyPaused", nil},
	{regexp.MustCompile(`^it is already running$`), "RefBulkAlreadyRunning", nil},
	{regexp.MustCompile(`^it is (\S+) — only a running task can be paused$`), "RefBulkOnlyRunningPause", []string{"Status"}},
	{regexp.MustCompile(`^it is (\S+) — only a paused task can be resumed$`), "RefBulkOnlyPausedResume", []string{"Status"}},
	{regexp.MustCompile(`^it is (\S+)$`), "RefBulkItIs", []string{"Status"}},
	{regexp.MustCompile(`^the URL points to another host: re-enter its password \(left masked\)$`), "RefOtherHostPassword", nil},
	{regexp.MustCompile(`^the URL points to another host: re-enter (.+) \(left masked\)$`), "RefOtherHostSecrets", []string{"Names"}},
	{regexp.MustCompile(`^node (\S+) is (\S+); connected needs it offline$`), "RefNodeConnectOffline", []string{"Name", "Status"}},
	{regexp.MustCompile(`^node (\S+) is (\S+); enabled needs it idle$`), "RefNodeEnableIdle", []string{"Name", "Status"}},
	{regexp.MustCompile(`^node (\S+) is (\S+); disabled needs it running$`), "RefNodeDisableRunning", []string{"Name", "Status"}},
	{regexp.MustCompile(`^(\S+) is the master; it has no node key$`), "RefMasterNoNodeKey", []string{"Name"}},
	{regexp.MustCompile(`^node (\S+) is bound to another machine's key; an admin can reset its identity$`), "RefNodeBoundKey", []string{"Name"}},
	{regexp.MustCompile(`^node (\S+) was added by an admin \(manual registration\); it is connected from the console and cannot register itself$`), "RefNodeManual", []string{"Name"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is the name of a master; workers and masters never share a name$`), "RefMasterNameShared", []string{"Name"}},
	{regexp.MustCompile(`^node "((?:[^"\\]|\\.)*)" already exists; names are case-insensitive$`), "RefNodeExistsCase", []string{"Name"}},
	{regexp.MustCompile(`^a node named "((?:[^"\\]|\\.)*)" \(or differing only in case\) was created meanwhile$`), "RefNodeCreatedMeanwhile", []string{"Name"}},
	{regexp.MustCompile(`^(\S+) answered as node "((?:[^"\\]|\\.)*)"$`), "RefAnsweredAsNode", []string{"Host", "Name"}},
	{regexp.MustCompile(`^(\S+) answered without a boot id$`), "RefAnsweredNoBootID", []string{"Host"}},
	{regexp.MustCompile(`^node (\S+): connect answer names node "((?:[^"\\]|\\.)*)" and carries no secret$`), "RefConnectNoSecret", []string{"Name", "Other"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not a valid IP address or host name$`), "RefHostInvalid", []string{"Value"}},
	{regexp.MustCompile(`^host part is empty$`), "RefHostEmpty", nil},
	{regexp.MustCompile(`^may hold only letters, digits, '\.', '_' and '-', and must start with a letter or digit$`), "RefNodeNameChars", nil},
	{regexp.MustCompile(`^port must be a number from 1 to 65535$`), "RefPortRange", nil},
	{regexp.MustCompile(`^must be empty, en or zh-CN$`), "RefLanguageInvalid", nil},
	{regexp.MustCompile(`^holds a control character \(line break, tab, NUL\) or invalid UTF-8$`), "RefControlChar", nil},
	{regexp.MustCompile(`^after must be the next cursor a previous page answered with$`), "RefAfterCursor", nil},
	{regexp.MustCompile(`^the database lacks (\d+) migration\(s\) of this build \(first: (\S+)\): run "schedulemaster migrate" or restart this master$`), "RefMigrationsLacking", []string{"N", "First"}},
	{regexp.MustCompile(`^the (\S+) user name "((?:[^"\\]|\\.)*)" cannot be a ScheduleMaster user name: it (.+)$`), "RefExternalBadName", []string{"Method", "Name", "Msg"}},
	{regexp.MustCompile(`^(\S+) is in no (\S+) group that grants a ScheduleMaster role \(admin, viewer or a project role\); ask your directory's administrator$`), "RefExternalNoGroup", []string{"Name", "Method"}},
	{regexp.MustCompile(`^a local user named (\S+) already exists \(names compare without case\), so the (\S+) account (\S+) cannot sign in; an admin can rename or delete the local user$`), "RefExternalLocalExists", []string{"Name", "Method", "Account"}},
	{regexp.MustCompile(`^a user named (\S+) \(compared without case\) already exists and could not be matched to this (\S+) account; an admin can rename or delete it$`), "RefExternalNameTaken", []string{"Name", "Method"}},
	{regexp.MustCompile(`^user (\S+) belongs to another person of the (\S+) provider; an admin can rename or delete it$`), "RefExternalOtherPerson", []string{"Name", "Method"}},
	{regexp.MustCompile(`^more than (\d+) requirements$`), "RefSelMoreRequirements", []string{"N"}},
	{regexp.MustCompile(`^expected "," or the end after a requirement, found (.+)$`), "RefSelExpectedAfterReq", []string{"Found"}},
	{regexp.MustCompile(`^expected a key, found (.+)$`), "RefSelExpectedKey", []string{"Found"}},
	{regexp.MustCompile(`^("(?:[^"\\]|\\.)*"): (.+)$`), "RefSelTokenMsg", []string{"Token", "Msg"}},
	{regexp.MustCompile(`^expected a value after "((?:[^"\\]|\\.)*)", found (.+)$`), "RefSelExpectedValueAfter", []string{"Op", "Found"}},
	{regexp.MustCompile(`^operator "((?:[^"\\]|\\.)*)" is not supported \(use =, ==, !=, in or notin\)$`), "RefSelOperator", []string{"Op"}},
	{regexp.MustCompile(`^expected "=", "==", "!=", "in", "notin", "," or the end after key "((?:[^"\\]|\\.)*)", found (.+)$`), "RefSelExpectedOp", []string{"Key", "Found"}},
	{regexp.MustCompile(`^expected "\(" after "((?:[^"\\]|\\.)*)", found (.+)$`), "RefSelExpectedParen", []string{"Op", "Found"}},
	{regexp.MustCompile(`^expected a value in the list, found (.+) \(values in a list are not empty\)$`), "RefSelExpectedListValue", []string{"Found"}},
	{regexp.MustCompile(`^expected "," or "\)" in the list, found (.+)$`), "RefSelExpectedListSep", []string{"Found"}},
	{regexp.MustCompile(`^control character (U\+[0-9A-F]+) \(only spaces separate tokens\)$`), "RefSelControlChar", []string{"Char"}},
	{regexp.MustCompile(`^longer than (\d+) bytes in canonical form \((\d+)\)$`), "RefSelCanonicalLonger", []string{"N", "Size"}},
	{regexp.MustCompile(`^the end$`), "RefSelTheEnd", nil},
	{regexp.MustCompile(`^node (\S+) answered (\S+) with (\d+): (.+)$`), "RefNodeAnsweredWith", []string{"Name", "Path", "Code", "Msg"}},
	{regexp.MustCompile(`^node (\S+) has a bad address (\S+)$`), "RefNodeBadAddress", []string{"Name", "Addr"}},
	{regexp.MustCompile(`^node (\S+) at (\S+) is unreachable \((.+)\)$`), "RefNodeUnreachable", []string{"Name", "Host", "Msg"}},
	{regexp.MustCompile(`^node (\S+) did not finish its answer to (\S+) \((.+)\)$`), "RefNodeAnswerUnfinished", []string{"Name", "Path", "Msg"}},
	{regexp.MustCompile(`^node (\S+) gave an answer to (\S+) that the master cannot read$`), "RefNodeAnswerUnreadable", []string{"Name", "Path"}},
	{regexp.MustCompile(`^the call of (\S+) on node (\S+) failed$`), "RefNodeCallFailed", []string{"Path", "Name"}},
	{regexp.MustCompile(`^node (\S+) answered (\d+) results for a batch of (\d+) runs$`), "RefNodeBatchResults", []string{"Name", "Got", "N"}},
	{regexp.MustCompile(`^start failed on node (.+?): (.+)$`), "RefDispatchFailedStart", []string{"Names", "Msg"}},
	{regexp.MustCompile(`^stop failed on node (.+?): (.+)$`), "RefDispatchFailedStop", []string{"Names", "Msg"}},
	{regexp.MustCompile(`^pause failed on node (.+?): (.+)$`), "RefDispatchFailedPause", []string{"Names", "Msg"}},
	{regexp.MustCompile(`^resume failed on node (.+?): (.+)$`), "RefDispatchFailedResume", []string{"Names", "Msg"}},
	{regexp.MustCompile(`^connection refused$`), "RefNetRefused", nil},
	{regexp.MustCompile(`^connection reset$`), "RefNetReset", nil},
	{regexp.MustCompile(`^unknown host$`), "RefNetUnknownHost", nil},
	{regexp.MustCompile(`^no answer in time$`), "RefNetNoAnswer", nil},
	{regexp.MustCompile(`^request canceled$`), "RefNetCanceled", nil},
	{regexp.MustCompile(`^network error$`), "RefNetError", nil},
	{regexp.MustCompile(`^no such run in progress on this node$`), "RefRunNotOnNode", nil},
	{regexp.MustCompile(`^the database is unreachable \(no answer within (\S+)\); retrying$`), "RefDBUnreachableWithin", []string{"Timeout"}},
	{regexp.MustCompile(`^the database is unreachable; retrying$`), "RefDBUnreachable", nil},
	{regexp.MustCompile(`^the database's migrations cannot be read; retrying$`), "RefMigrationsUnreadable", nil},
	{regexp.MustCompile(`^invalid input$`), "RefBareInvalid", nil},
	{regexp.MustCompile(`^already exists$`), "RefBareDuplicate", nil},
	{regexp.MustCompile(`^not allowed in this state$`), "RefBareState", nil},
	{regexp.MustCompile(`^worker call failed$`), "RefBareWorker", nil},
	{regexp.MustCompile(`^unauthorized$`), "RefBareUnauthorized", nil},
	{regexp.MustCompile(`^too many attempts$`), "RefBareLimited", nil},
	{regexp.MustCompile(`^too large$`), "RefBareTooLarge", nil},
	{regexp.MustCompile(`^busy$`), "RefBareBusy", nil},
	{regexp.MustCompile(`^unavailable$`), "RefBareUnavailable", nil},
	{regexp.MustCompile(`^no executor$`), "RefWhoNoExecutor", nil},
	{regexp.MustCompile(`^executors: ([^;]+); (selector .+)$`), "RefWhoExecutorsAndMore", []string{"Names", "Msg"}},
	{regexp.MustCompile(`^executors: ([^;]+)$`), "RefWhoExecutors", []string{"Names"}},
	{regexp.MustCompile(`^selector (.+) selects no worker$`), "RefWhoSelectorNone", []string{"Selector"}},
	{regexp.MustCompile(`^selector (.+) selects (.+)$`), "RefWhoSelector", []string{"Selector", "Names"}},
	{regexp.MustCompile(`^workflow run (\S+) does not exist$`), "RefWorkflowRunNotFound", []string{"ID"}},
	{regexp.MustCompile(`^workflow (\S+) does not exist$`), "RefWorkflowNotFound", []string{"ID"}},
	{regexp.MustCompile(`^backfill (\S+) does not exist$`), "RefBackfillNotFound", []string{"ID"}},
	{regexp.MustCompile(`^workflow (\S+) changed since version (\d+) \(it is at version (\d+), saved (\S+)\); reload it and make your change again$`), "RefWorkflowMoved", []string{"ID", "From", "Version", "At"}},
	{regexp.MustCompile(`^workflow (\S+) was saved by someone else meanwhile; reload it and make your change again$`), "RefWorkflowSavedMeanwhile", []string{"ID"}},
	{regexp.MustCompile(`^workflow (\S+) is paused already$`), "RefWorkflowPausedAlready", []string{"ID"}},
	{regexp.MustCompile(`^workflow (\S+) is not paused$`), "RefWorkflowNotPaused", []string{"ID"}},
	{regexp.MustCompile(`^backfill (\S+) is (\S+): it cannot pause$`), "RefBackfillCannotPause", []string{"ID", "State"}},
	{regexp.MustCompile(`^backfill (\S+) is (\S+): it cannot resume$`), "RefBackfillCannotResume", []string{"ID", "State"}},
	{regexp.MustCompile(`^backfill (\S+) is (\S+): it cannot cancel$`), "RefBackfillCannotCancel", []string{"ID", "State"}},
	{regexp.MustCompile(`^workflow run (\S+) is not in progress: it ended as (\S+)$`), "RefWorkflowRunEnded", []string{"ID", "Status"}},
	{regexp.MustCompile(`^workflow run (\S+) is (\S+): only a failed, timed out or cancelled run is run again$`), "RefWorkflowRerunState", []string{"ID", "Status"}},
	{regexp.MustCompile(`^must be text \(UTF-8, no control characters\)$`), "RefTextNoControl", nil},
	{regexp.MustCompile(`^must be at most (\d+) characters$`), "RefMustAtMostChars", []string{"N"}},
	{regexp.MustCompile(`^must be 1-100 letters, digits, '\.', '_' or '-', starting with a letter or digit$`), "RefWorkflowKey", nil},
	{regexp.MustCompile(`^must be from 0 \(none\) to (\S+)$`), "RefFromNone", []string{"Max"}},
	{regexp.MustCompile(`^at most (\d+) params$`), "RefAtMostParamsShort", []string{"N"}},
	{regexp.MustCompile(`^param "((?:[^"\\]|\\.)*)": a name is letters, digits and '_', not starting with a digit$`), "RefParamName", []string{"Name"}},
	{regexp.MustCompile(`^param "((?:[^"\\]|\\.)*)": a value is text of at most (\d+) bytes$`), "RefParamValue", []string{"Name", "N"}},
	{regexp.MustCompile(`^a workflow has at least one step$`), "RefAtLeastOneStep", nil},
	{regexp.MustCompile(`^(\d+) steps: at most (\d+)$`), "RefTooManySteps", []string{"N", "Max"}},
	{regexp.MustCompile(`^(\d+) steps or more: at most (\d+)$`), "RefTooManyStepsForm", []string{"N", "Max"}},
	{regexp.MustCompile(`^must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'$`), "RefStepName", nil},
	{regexp.MustCompile(`^step "((?:[^"\\]|\\.)*)" is steps\[(\d+)\] already: each step has its own name$`), "RefStepNameTaken", []string{"Name", "N"}},
	{regexp.MustCompile(`^is required: the task the step runs$`), "RefStepTaskRequired", nil},
	{regexp.MustCompile(`^task (\S+) does not exist in this workflow's project$`), "RefStepTaskNotInProject", []string{"ID"}},
	{regexp.MustCompile(`^a task with broadcast routing cannot be a step yet: its runs on every executor are not one step's run$`), "RefStepBroadcast", nil},
	{regexp.MustCompile(`^must be 0 \(the task's\) or from (\S+) to (\S+)$`), "RefStepTimeout", []string{"Min", "Max"}},
	{regexp.MustCompile(`^step "((?:[^"\\]|\\.)*)" waits for itself$`), "RefStepWaitsForItself", []string{"Name"}},
	{regexp.MustCompile(`^no step is named "((?:[^"\\]|\\.)*)"$`), "RefNoStepNamed", []string{"Name"}},
	{regexp.MustCompile(`^step "((?:[^"\\]|\\.)*)" waits for "((?:[^"\\]|\\.)*)" twice: one edge per parent$`), "RefStepWaitsTwice", []string{"Name", "Parent"}},
	{regexp.MustCompile(`^must be success, failure or always$`), "RefEdgeOn", nil},
	{regexp.MustCompile(`^the steps wait for each other in a cycle: (.+)$`), "RefStepCycle", []string{"Cycle"}},
	{regexp.MustCompile(`^step "((?:[^"\\]|\\.)*)" can never run: it needs step "((?:[^"\\]|\\.)*)" to both succeed and fail$`), "RefStepNeverRuns", []string{"Name", "Parent"}},
	{regexp.MustCompile(`^workflow “(.+)” has this key already$`), "RefWorkflowKeyTaken", []string{"Title"}},
	{regexp.MustCompile(`^the workflow has no schedule: a backfill runs the fires of a schedule in a window$`), "RefBackfillNoSchedule", nil},
	{regexp.MustCompile(`^is required: the window's start$`), "RefWindowStartRequired", nil},
	{regexp.MustCompile(`^is required: the window's end$`), "RefWindowEndRequired", nil},
	{regexp.MustCompile(`^must be after from$`), "RefAfterFrom", nil},
	{regexp.MustCompile(`^is in the future: a backfill runs past fires \(the schedule runs the others\)$`), "RefBackfillFuture", nil},
	{regexp.MustCompile(`^the schedule has no fire from (\S+) to (\S+)$`), "RefBackfillNoFire", []string{"From", "To"}},
	{regexp.MustCompile(`^the window holds more than (\d+) fires: a backfill runs at most (\d+); split it$`), "RefBackfillTooMany", []string{"N", "Max"}},
	{regexp.MustCompile(`^waits for the run in progress \(overlap policy queue\)$`), "RefNoteQueued", nil},
	{regexp.MustCompile(`^a run was in progress and another waited already \(overlap policy queue: one waits\)$`), "RefNoteQueueFull", nil},
	{regexp.MustCompile(`^a run was still in progress \(overlap policy skip\)$`), "RefNoteOverlapSkip", nil},
	{regexp.MustCompile(`^(\d+) fires were missed from (\S+) to (\S+) while no master ran the schedule; this run stands for the first \(misfire policy run_once\)$`), "RefNoteMissedRunOnce", []string{"N", "From", "To"}},
	{regexp.MustCompile(`^(\d+) fires were missed from (\S+) to (\S+) while no master ran the schedule \(misfire policy skip\)$`), "RefNoteMissedSkip", []string{"N", "From", "To"}},
	{regexp.MustCompile(`^more than (\d+) fires were missed from (\S+) while no master ran the schedule; this run stands for the first \(misfire policy run_once\)$`), "RefNoteManyMissedRunOnce", []string{"N", "From"}},
	{regexp.MustCompile(`^more than (\d+) fires were missed from (\S+) while no master ran the schedule \(misfire policy skip\)$`), "RefNoteManyMissedSkip", []string{"N", "From"}},
	// The task types beyond HTTP and shell, and their connections; the
	// list of values last, after every narrower "is not one of".
	{regexp.MustCompile(`^must be empty for a (\S+) task$`), "RefEmptyForType", []string{"Type"}},
	{regexp.MustCompile(`^is required for a (\S+) task$`), "RefRequiredForType", []string{"Type"}},
	{regexp.MustCompile(`^is required: one of (.+)$`), "RefRequiredOneOf", []string{"List"}},
	{regexp.MustCompile(`^is required: the name of a connection$`), "RefConnRequired", nil},
	{regexp.MustCompile(`^must be a connection's name: letters, digits, '\.', '_' or '-'$`), "RefConnName", nil},
	{regexp.MustCompile(`^no connection named "((?:[^"\\]|\\.)*)" in this project \(nor for every project\): define it first$`), "RefConnNotDefined", []string{"Name"}},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is a (\S+) connection: a (\S+) task needs a (.+) one$`), "RefConnWrongKind", []string{"Name", "Kind", "Type", "Kinds"}},
	{regexp.MustCompile(`^connection "((?:[^"\\]|\\.)*)" is used by (\d+) task\(s\) \((.+)\): point them at another connection or delete them first$`), "RefConnInUse", []string{"Name", "N", "Tasks"}},
	{regexp.MustCompile(`^no running worker to test the connection on: start one \(with --allow-types for its task type\)$`), "RefConnNoWorker", nil},
	{regexp.MustCompile(`^no running worker allows (\S+) tasks \((.+) was started without (--allow-types \S+)\): start one with --allow-types \S+$`), "RefNoTypeWorkerOne", []string{"Type", "Names", "Flag"}},
	{regexp.MustCompile(`^no running worker allows (\S+) tasks \((.+) were started without (--allow-types \S+)\): start one with --allow-types \S+$`), "RefNoTypeWorkerMany", []string{"Type", "Names", "Flag"}},
	{regexp.MustCompile(`^no executor allows (\S+) tasks: (.+) was started without (--allow-types \S+); restart it with --allow-types \S+ or choose a worker that was$`), "RefNoTypeExecutorOne", []string{"Type", "Names", "Flag"}},
	{regexp.MustCompile(`^no executor allows (\S+) tasks: (.+) were started without (--allow-types \S+); restart one of them with --allow-types \S+ or choose a worker that was$`), "RefNoTypeExecutorMany", []string{"Type", "Names", "Flag"}},
	{regexp.MustCompile(`^is required: host:port$`), "RefAddressRequired", nil},
	{regexp.MustCompile(`^is required for (postgres|mysql)$`), "RefRequiredForKind", []string{"Kind"}},
	{regexp.MustCompile(`^must be tokens separated by dots, without spaces or the wildcards \* and >$`), "RefNATSSubject", nil},
	{regexp.MustCompile(`^"((?:[^"\\]|\\.)*)" is not one of (.+)$`), "RefNotOneOf", []string{"Value", "List"}},
}

// Refusal says an engine sentence (a refusal or a field error) in the
// reader's language when the catalogs know it, else as it is.
func Refusal(ctx context.Context, msg string) string { return RefusalIn(locale.From(ctx), msg) }

// RefusalIn is Refusal in the language of l.
func RefusalIn(l *locale.Localizer, msg string) string {
	if !l.Chinese() || msg == "" {
		return msg
	}
	return refusalIn(l, msg, 0)
}

// refusalIn says msg with the catalog of l, whatever its language; depth
// counts the sentences msg sits inside.
func refusalIn(l *locale.Localizer, msg string, depth int) string {
	for _, r := range refusalTexts {
		m := r.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		kv := make([]any, 0, 2*len(r.names))
		for i, n := range r.names {
			v := m[i+1]
			if nestedGroups[n] && depth < maxRefusalDepth {
				if t := refusalIn(l, v, depth+1); t != v {
					v = nestedMark + t
				}
			}
			kv = append(kv, n, v)
		}
		return joinNested(l.T(r.id, kv...))
	}
	return msg
}

// nestedMark marks where a translated inner sentence starts, so that the
// space the outer message puts before it (right for English words and user
// data) goes when the inner sentence is Chinese: "却遇到结尾", not "却遇到 结尾".
const nestedMark = "\uE000"

// joinNested removes the marks, and the space before a mark that stands
// between two Chinese characters.
func joinNested(s string) string {
	if !strings.Contains(s, nestedMark) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, nestedMark)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		before, after := s[:i], s[i+len(nestedMark):]
		if strings.HasSuffix(before, " ") {
			prev, _ := utf8.DecodeLastRuneInString(before[:len(before)-1])
			next, _ := utf8.DecodeRuneInString(after)
			if unicode.Is(unicode.Han, prev) && unicode.Is(unicode.Han, next) {
				before = before[:len(before)-1]
			}
		}
		b.WriteString(before)
		s = after
	}
}

// nestedGroups are the placeholders that hold another engine sentence (the
// reason inside "label "x": key is empty", the pool list inside a pool
// allowance refusal, the token a selector error found, who executes a task
// that has no running worker, the cron field a sentence is about), said in
// the reader's language in turn.
var nestedGroups = map[string]bool{"Msg": true, "Pools": true, "Found": true, "Why": true, "Field": true}

// maxRefusalDepth bounds the nesting, so that no sentence, however built,
// makes the translation recurse without end.
const maxRefusalDepth = 4
