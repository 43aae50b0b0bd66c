package views

import (
	"regexp"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/locale"
)

// refusalSamples holds one sentence the engine really writes for every
// pattern of refusalTexts, with the message it must be said with; the
// samples of the newer patterns are copied from the Errorf and FieldErrors
// calls in master/, protocol/ and handlers/form.
var refusalSamples = []struct{ id, msg string }{
	{"RefRequired", "is required"},
	{"RefWholeNumber", "must be a whole number"},
	{"RefInPast", "is in the past"},
	{"RefNoMatchPassword", "does not match the password"},
	{"RefNoMatchNewPassword", "does not match the new password"},
	{"RefTaken", "is already taken"},
	{"RefWrong", "is wrong"},
	{"RefDiffer", "must differ from the current password"},
	{"RefGoDuration", "must be a Go duration such as 10s, 1m30s or 500ms"},
	{"RefHTTPOrHTTPS", "must be http or https"},
	{"RefAfterStart", "must be after start_at"},
	{"RefRequiredHTTP", "is required for an http task"},
	{"RefRequiredShell", "is required for a shell task"},
	{"RefRequiredCron", "is required for a cron schedule"},
	{"RefRequiredOnce", "is required for a one-time schedule"},
	{"RefHostPort", "must be host:port, e.g. 10.0.0.5:30001"},
	{"RefTaskNotFound", "task 01J9ZX does not exist"},
	{"RefRunNotFound", "run 01J9ZY does not exist"},
	{"RefNodeNotFound", "there is no node w1"},
	{"RefNodeNotExist", `node "w1" does not exist`},
	{"RefUserNotFound", "there is no user bob"},
	{"RefProjectNotFound", "project billing not found"},
	{"RefPoolEmpty", "pool pool=billing has no member, no task and no approval"},
	{"RefStopping", "the master is stopping"},
	{"RefWrongLogin", "wrong username or password"},
	{"RefNodeRunningDelete", "node w1 is running; disable it before deleting it"},
	{"RefTaskStopFirst", "task nightly is running; stop it before editing"},
	{"RefTaskMoved", "task 5c1e changed since version 3: alice saved version 4 at 2030-01-02T03:04:05Z; reload it and make your change again"},
	{"RefNoWorker", "no running worker for this task (executors: w1; selector pool=billing selects no worker)"},
	{"RefDBUnavailable", "the database did not answer in time or refused the connection; retrying"},
	{"RefNotFound", "not found"},
	{"RefForbidden", "forbidden"},
	{"RefAdminOnly", "forbidden: only a cluster admin may change nodes, pools, users, settings or projects"},
	{"RefReaderOnly", "forbidden: only cluster admins and viewers of every project may see this"},
	{"RefRoleMayNot", "forbidden: your role in project billing may not do this"},
	{"RefAdminAddsNodes", "forbidden: only a cluster admin adds nodes"},
	{"RefDisableSelf", "you cannot disable yourself; ask another admin"},
	{"RefLastAdmin", "bob is the only enabled admin; make another user admin first, so that someone can still change things"},
	{"RefDefaultProject", "the default project cannot be deleted"},
	{"RefLongerChars", "is longer than 200 characters"},
	{"RefLongerBytes", "is longer than 255 bytes"},
	{"RefTaskKey", "must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"},
	{"RefCronInvalidFields", "\"* * *\" is not a valid cron expression (5 fields, or 6 with leading seconds): expected exactly 5 fields, found 3: [* * *]"},
	{"RefCronInvalid", "\"@every 0s\" is not a valid cron expression: @every must be more than 0"},
	{"RefCronOutside", "minute 61 is outside 0-59"},
	{"RefCronNotNumberOrName", "day of week \"fooday\" is not a number or a name like mon"},
	{"RefCronNotNumber", "minute \"x\" is not a number"},
	{"RefCronBackwards", "minute range 30-10 runs backwards"},
	{"RefCronStep", "hour step \"0\" must be a whole number of at least 1"},
	{"RefCronEmptyItem", "month has an empty item between commas"},
	{"RefCronTooMany", "minute \"1-2-3\" has more than one \"-\""},
	{"RefCronFieldCount", "has 2 fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with leading seconds"},
	{"RefCronDescriptor", "\"@fortnightly\" is not a shorthand cron knows: use @yearly, @monthly, @weekly, @daily, @hourly or @every with a duration"},
	{"RefCronHashed", "minute \"H(0-99)\": H(0-99) is outside 0-59"},
	{"RefHOutside", "H(0-99) is outside 0-59"},
	{"RefHBackwards", "H(9-3) runs backwards"},
	{"RefHStep", "H/n needs a whole number n of at least 1"},
	{"RefHStepLonger", "the step 100 is longer than the range 0-59"},
	{"RefHMissingParen", "H must be H, H(a-b), H/n or H(a-b)/n: missing )"},
	{"RefHNeedsRange", "H must be H, H(a-b), H/n or H(a-b)/n: H(a-b) needs a range like H(0-29)"},
	{"RefHForms", "H must be H, H(a-b), H/n or H(a-b)/n"},
	{"RefHWholeNumbers", "H(a-b) needs whole numbers"},
	{"RefHFields", "H needs 5 fields, or 6 with leading seconds (got 3)"},
	{"RefCronSecond", "second"},
	{"RefCronMinute", "minute"},
	{"RefCronHour", "hour"},
	{"RefCronDayOfMonth", "day of month"},
	{"RefCronMonth", "month"},
	{"RefCronDayOfWeek", "day of week"},
	{"RefCronTZPrefix", "time zone prefixes are not supported; set the task's timezone field instead"},
	{"RefEveryNeeds", "@every needs a duration like 30s or 5m"},
	{"RefEveryMsg", "@every is shorter than 1s: sub-second intervals cannot run as written"},
	{"RefNeverFiresYears", "never fires in the next 5 years"},
	{"RefNeverFiresWindow", "never fires between start_at and end_at"},
	{"RefNeverFiresFirst", "never fires between start_at and end_at: the first fire would be 2026-05-01 12:00:00 UTC"},
	{"RefAtBeforeStart", "is before start_at: it would never fire"},
	{"RefAtAfterEnd", "is after end_at: it would never fire"},
	{"RefKindRequired", "is required: cron, interval or once"},
	{"RefKindInvalid", "\"weekly\" is not cron, interval or once"},
	{"RefAlignCron", "applies to interval schedules only (a cron schedule spreads with H, like H * * * *)"},
	{"RefAlignInvalid", "\"middle\" is not spread or epoch"},
	{"RefTimeoutDays", "must be more than 0 and at most 30 days"},
	{"RefMoreThanZeroAtMost", "must be more than 0 and at most 24h0m0s"},
	{"RefAtLeast100ms", "must be at least 100ms"},
	{"RefFromKeepForever", "must be from 0 (keep forever) to 3650"},
	{"RefFromNever", "must be 0 (never) or from 1h to 8760h"},
	{"RefWholeFromTo", "must be a whole number from 0 to 10"},
	{"RefFromTo", "must be from 0 to 10"},
	{"RefAtMostParams", "at most 64 parameters"},
	{"RefParamKey", "key \"1x\" must be letters, digits and '_', not starting with a digit"},
	{"RefValueLongerBytes", "value of \"TOKEN\" is longer than 4096 bytes"},
	{"RefEmptyForHTTP", "must be empty for an http task"},
	{"RefEmptyForShell", "must be empty for a shell task"},
	{"RefTypeRequired", "is required: http or shell"},
	{"RefTypeInvalid", "\"ftp\" is not http or shell"},
	{"RefEmptyForType", "must be empty for a nats task"},
	{"RefRequiredForType", "is required for a sql task"},
	{"RefRequiredOneOf", "is required: one of http, shell, nats"},
	{"RefNotOneOf", "\"ftp\" is not one of http, shell, nats, amqp"},
	{"RefConnRequired", "is required: the name of a connection"},
	{"RefConnName", "must be a connection's name: letters, digits, '.', '_' or '-'"},
	{"RefConnNotDefined", "no connection named \"bus\" in this project (nor for every project): define it first"},
	{"RefConnWrongKind", "\"bus\" is a redis connection: a nats task needs a nats one"},
	{"RefConnInUse", "connection \"bus\" is used by 2 task(s) (\"a\", \"b\"): point them at another connection or delete them first"},
	{"RefConnNoWorker", "no running worker to test the connection on: start one (with --allow-types for its task type)"},
	{"RefNoTypeWorkerOne", "no running worker allows nats tasks (w1 was started without --allow-types nats): start one with --allow-types nats"},
	{"RefNoTypeWorkerMany", "no running worker allows nats tasks (w1, w2 were started without --allow-types nats): start one with --allow-types nats"},
	{"RefNoTypeExecutorOne", "no executor allows nats tasks: w1 was started without --allow-types nats; restart it with --allow-types nats or choose a worker that was"},
	{"RefNoTypeExecutorMany", "no executor allows nats tasks: w1, w2 were started without --allow-types nats; restart one of them with --allow-types nats or choose a worker that was"},
	{"RefAddressRequired", "is required: host:port"},
	{"RefRequiredForKind", "is required for postgres"},
	{"RefNATSSubject", "must be tokens separated by dots, without spaces or the wildcards * and >"},
	{"RefOverlapInvalid", "\"drop\" is not allow, skip or queue"},
	{"RefMisfireInvalid", "\"all\" is not skip or run_once"},
	{"RefAtCapacityInvalid", "\"drop\" is not wait or skip"},
	{"RefRoutingKey", "must name a param: hash routing uses its value"},
	{"RefRoutingInvalid", "\"random\" is not weighted, round_robin, failover, least_busy, hash or broadcast"},
	{"RefNULOrUTF8", "holds a NUL byte or invalid UTF-8"},
	{"RefMethodInvalid", "\"FETCH\" is not one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"},
	{"RefNotAbsoluteURL", "\"example.com/hook\" is not an absolute http(s) URL"},
	{"RefURLSpaceOnceSubst", "holds a space, line break or NUL once {{KEY}} parameters are substituted"},
	{"RefURLInvalidOnceSubst", "is not a valid URL once {{KEY}} parameters are substituted"},
	{"RefAtMostHeaders", "at most 64 headers"},
	{"RefHeaderName", "\"X Bad\" is not a valid header name"},
	{"RefValueLongerKiB", "value of \"Authorization\" is longer than 8 KiB"},
	{"RefValueLineBreakOnceSubst", "value of \"X-Id\" has a line break or NUL once {{KEY}} parameters are substituted"},
	{"RefValueLineBreak", "value of \"X-Id\" has a line break or NUL"},
	{"RefLargerKiB", "is larger than 64 KiB"},
	{"RefLineBreak", "has a line break or NUL"},
	{"RefCommandLarge", "command and args are larger than 64 KiB"},
	{"RefAtMostVariables", "at most 64 variables"},
	{"RefVariableName", "\"1PATH\" is not a valid variable name"},
	{"RefMoreThanZero", "must be more than 0"},
	{"RefIntervalShort", "is shorter than 1s: sub-second intervals cannot run as written"},
	{"RefWholeSeconds", "must be a whole number of seconds"},
	{"RefLongerThan", "is longer than 8760h0m0s"},
	{"RefTZNotAllowed", "\"Local\" is not allowed: name an IANA zone like Europe/Berlin"},
	{"RefTZInvalid", "\"Mars/Olympus\" is not an IANA time zone like Europe/Berlin or America/New_York"},
	{"RefNotDurationSchedule", "\"often\" is not a duration like 2s, 5m or 1h"},
	{"RefNotDurationTimeout", "\"long\" is not a duration like 30s or 5m"},
	{"RefPruneForm", "must be 0 (never), a number of days such as 7d, or a Go duration such as 24h or 36h"},
	{"RefLabel", "label \"pool=\": key \"pool\" is given twice"},
	{"RefLabelsLonger", "labels are longer than 4096 bytes"},
	{"RefKeyTwice", "key \"pool\" is given twice"},
	{"RefMoreLabels", "more than 32 labels"},
	{"RefLabelsCount", "40 labels, more than 32"},
	{"RefKeyEmpty", "key is empty"},
	{"RefKeyLonger", "key is longer than 63 characters"},
	{"RefKeyPrefix", "key prefix \"Ex_ample\" must be a DNS subdomain (lowercase letters, digits, '-' and '.', e.g. example.com) followed by '/'"},
	{"RefKeyChars", "key must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"},
	{"RefKeyNameChars", "key name after the prefix must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"},
	{"RefValueLonger", "value is longer than 63 characters"},
	{"RefValueChars", "value must be empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit"},
	{"RefSelector", "selector \"pool in (a\": at character 10: longer than 512 bytes"},
	{"RefSelectorLonger", "longer than 512 bytes"},
	{"RefKeyOwned", "\"nightly\" is the key of task 01J9ZX already"},
	{"RefUnknownNode", "unknown node \"w9\""},
	{"RefExecutorTheMaster", "\"m1\" is the master, not a worker"},
	{"RefExecutorAMaster", "\"m1\" is a master, not a worker"},
	{"RefAtMostExecutors", "at most 100 executors"},
	{"RefAtMostKeepers", "at most 100 keepers"},
	{"RefNoShellWorkerOne", "no running worker allows shell tasks (w1 was started without --allow-shell): start one with --allow-shell"},
	{"RefNoShellWorkerMany", "no running worker allows shell tasks (w1, w2 were started without --allow-shell): start one with --allow-shell"},
	{"RefNoShellExecutorOne", "no executor allows shell tasks: w1 was started without --allow-shell; restart it with --allow-shell or choose a worker that was"},
	{"RefNoShellExecutorMany", "no executor allows shell tasks: w1, w2 were started without --allow-shell; restart one of them with --allow-shell or choose a worker that was"},
	{"RefNoWorkerToAssign", "no running worker to assign: name the executors, or connect and enable a worker first"},
	{"RefNoWorkerInPools", "no running worker in what project billing may run on (pools pool=billing): name the executors, or start a worker in one of those pools"},
	{"RefPoolsList", "pools pool=billing; zone in (a,b)"},
	{"RefNoPoolAllowed", "no pool: a cluster admin has allowed it none"},
	{"RefSelectorOutside", "selector zone=eu may select workers outside what project billing may run on (pools pool=billing); add one of those pools' requirements to the selector, or ask a cluster admin to allow the pool"},
	{"RefNodeOutside", "node w3 is outside what project billing may run on (no pool: a cluster admin has allowed it none)"},
	{"RefProjectRunsOnlyOn", "project billing may run only on pools pool=billing: give a selector within them, or executors"},
	{"RefKeeperNotReader", "\"bob\" is not a user who may read this project"},
	{"RefOwnChild", "a task cannot be its own child"},
	{"RefUnknownTask", "unknown task \"nightly\""},
	{"RefChildCycle", "these children form a cycle: a → b → a"},
	{"RefNotJSONBody", "is not valid JSON (content_type is application/json)"},
	{"RefNotFormBody", "is not a valid URL-encoded form (content_type is application/x-www-form-urlencoded)"},
	{"RefNotAHeader", "cannot be sent as a header: has a line break or NUL"},
	{"RefDelayOrAt", "give either delay or at, not both"},
	{"RefDelayRequired", "is required unless at is given: a duration like \"30m\" or a number of seconds"},
	{"RefNotRFC3339", "\"tomorrow\" is not an RFC 3339 time like 2026-05-01T12:00:00Z"},
	{"RefDaysAhead", "is more than 30 days ahead"},
	{"RefNotDelay", "\"soon\" is not a duration like \"30m\" or a number of seconds"},
	{"RefSpaceLineNUL", "holds a space, line break or NUL"},
	{"RefContentTypeInvalid", "\"text/plain\" is not application/json or application/x-www-form-urlencoded"},
	{"RefDelayedNotFound", "delayed task 01J9ZX does not exist"},
	{"RefDelayedOnItsWay", "delayed task 01J9ZX is due and on its way to worker w1; it can no longer be cancelled"},
	{"RefDelayedCancelledAlready", "delayed task 01J9ZX is cancelled already"},
	{"RefDelayedFinished", "delayed task 01J9ZX has finished (success); only a pending task can be cancelled"},
	{"RefStatusOneOf", "status must be one of pending, running, success, failed, cancelled"},
	{"RefResultOneOf", "result must be one of success, failed, timeout"},
	{"RefMasterOwnName", "is the master's own name"},
	{"RefTakenByNode", "is already taken by another node"},
	{"RefNodeExists", "a node named \"w1\" already exists"},
	{"RefNodeChanged", "node \"w1\" changed state meanwhile; reload and retry"},
	{"RefMasterNodeNoEdit", "the master's own node cannot be edited"},
	{"RefMasterCannotConnect", "m1 is the master; it cannot be connected"},
	{"RefMasterCannotEnable", "m1 is the master; it cannot be enabled"},
	{"RefMasterCannotDisable", "m1 is the master; it cannot be disabled"},
	{"RefMasterCannotDelete", "m1 is the master; it cannot be deleted"},
	{"RefNodeAwaitsApproval", "node w1 waits for an admin's approval; approve it first"},
	{"RefTooManyPending", "100 nodes already wait for approval (the maximum); an admin must approve or delete some first"},
	{"RefMasterNoLabels", "m1 is a master; only workers have labels"},
	{"RefPoolNamed", "a pool is named key=value, for example pool=billing"},
	{"RefPoolOneLabel", "a pool is one label, key=value, for example pool=billing"},
	{"RefPoolNotApproved", "pool pool=billing is not approved"},
	{"RefPoolKey", "pool key: key is empty"},
	{"RefUsernameChars", "may only contain letters, digits, dot, underscore and hyphen"},
	{"RefNotDots", "cannot be . or .."},
	{"RefClusterRoleInvalid", "must be admin or viewer, not \"root\""},
	{"RefEmailInvalid", "is not a valid email address (like ops@example.com)"},
	{"RefAtLeastChars", "must be at least 12 characters"},
	{"RefAtMostBytes", "must be at most 72 bytes"},
	{"RefUserExists", "user bob already exists"},
	{"RefReadUsers", "forbidden: only cluster admins and viewers of every project read other users"},
	{"RefListUsers", "forbidden: only cluster admins and viewers list users"},
	{"RefNothingToChange", "nothing to change: send role, disabled, password or email"},
	{"RefNoLocalPassword", "bob signs in with ldap and has no local password"},
	{"RefYouNoLocalPassword", "you sign in with oidc and have no local password to change"},
	{"RefFirstAdminPassword", "the first admin's password must be at least 12 characters"},
	{"RefLocalPasswordsAdmins", "wrong username or password; local passwords are for cluster admins only: sign in with your organisation's account"},
	{"RefMethodNotConfigured", "sign-in method \"ldap\" is not configured"},
	{"RefUTF8NoNULBytes", "must be valid UTF-8 without NUL bytes"},
	{"RefUTF8NoNUL", "must be valid UTF-8 without NUL"},
	{"RefExpiresFuture", "must be in the future (at least a minute from now)"},
	{"RefExpiresFiveYears", "must be at most 5 years from now"},
	{"RefProjectRoleInvalid", "must be one of owner, editor, operator, viewer, not \"boss\""},
	{"RefTokensForYourself", "forbidden: you may create tokens only for yourself"},
	{"RefTokenNoUser", "there is no user bob: a token acts as an existing user"},
	{"RefTokenUserDisabled", "user bob is disabled: its tokens would be refused"},
	{"RefScopedNoClusterToken", "forbidden: a token limited to one project cannot create a cluster token; name its project"},
	{"RefTokenNotFound", "there is no API token 42"},
	{"RefTokenRevokedAlready", "the token “ci” was already revoked"},
	{"RefTokenRoleTooHigh", "bob's role in project billing is viewer: a token may not be given more"},
	{"RefClusterTokenRole", "a cluster token has its owner's role; name a project to give it a lower one"},
	{"RefTokenUnknown", "this API token is unknown or revoked"},
	{"RefTokenExpired", "this API token expired at 2026-01-01T00:00:00Z; create a new one"},
	{"RefTokenOwnerGone", "this API token's owner no longer exists"},
	{"RefTokenOwnerDisabled", "this API token's owner is disabled"},
	{"RefProjectName", "must be 1 to 63 characters: lower-case letters, digits and '-', starting with a letter or digit"},
	{"RefAtMostPools", "at most 32 pools"},
	{"RefPoolSelectsNothing", "pool \"zone notin ()\" selects nothing"},
	{"RefPoolError", "pool \"=x\": selector \"=x\": at character 1: longer than 512 bytes"},
	{"RefProjectExists", "a project named billing exists already"},
	{"RefAdminProjectPools", "forbidden: only a cluster admin may change the pools a project may run on"},
	{"RefProjectNotEmpty", "project billing still has tasks, delayed tasks or API tokens; delete or move them first"},
	{"RefNotMember", "bob is not a member of project billing"},
	{"RefNoUserNamed", "no user named \"bob\""},
	{"RefAtMostChars", "at most 500 characters"},
	{"RefTaskCannotStart", "task 01J9ZX is paused; cannot start it"},
	{"RefTaskCannotStop", "task 01J9ZX is paused; cannot stop it"},
	{"RefTaskCannotPause", "task 01J9ZX is paused; cannot pause it"},
	{"RefTaskCannotResume", "task 01J9ZX is paused; cannot resume it"},
	{"RefTaskCannotRun", "task 01J9ZX is paused; cannot run it"},
	{"RefTaskChanged", "task 01J9ZX changed state meanwhile; reload and retry"},
	{"RefNoCatchUp", "task 01J9ZX is stopped; no catch-up run"},
	{"RefNoTaskSelected", "no task selected: select at least one task"},
	{"RefBulkTooMany", "600 tasks named: at most 500 at once"},
	{"RefBulkUnknownAction", "unknown action \"explode\": it must be one of start, stop, pause"},
	{"RefRunNotInProgress", "run 01J9ZX is not in progress: it ended as success"},
	{"RefRunNodeGone", "run 01J9ZX ran on node w1, which no longer exists"},
	{"RefRunEndedOnWay", "run 01J9ZX has already ended on node w1; its result is on its way"},
	{"RefNodeCannotKill", "node w1 cannot kill runs (an older version, or something else answers at 10.0.0.5:30001)"},
	{"RefRoleInProjectRead", "forbidden: your role in this project (viewer) may not read it"},
	{"RefRoleAnyProjectRead", "forbidden: your role may not read it in any project"},
	{"RefRoleInProjectOperate", "forbidden: your role in this project (viewer) may not start, stop, run, kill or cancel"},
	{"RefRoleAnyProjectOperate", "forbidden: your role may not start, stop, run, kill or cancel in any project"},
	{"RefRoleInProjectEdit", "forbidden: your role in this project (viewer) may not create, change or delete tasks and delayed tasks"},
	{"RefRoleAnyProjectEdit", "forbidden: your role may not create, change or delete tasks and delayed tasks in any project"},
	{"RefRoleInProjectSecrets", "forbidden: your role in this project (viewer) may not see secrets"},
	{"RefRoleAnyProjectSecrets", "forbidden: your role may not see secrets in any project"},
	{"RefRoleInProjectManage", "forbidden: your role in this project (viewer) may not manage members or tokens"},
	{"RefRoleAnyProjectManage", "forbidden: your role may not manage members or tokens in any project"},
	{"RefShorterThanInterval", "must be shorter than the health interval"},
	{"RefHostNameInvalid", "is not a valid host name or IP address"},
	{"RefPlainEmail", "must be a plain e-mail address, e.g. scheduler@example.com"},
	{"RefSMTPTLS", "must be none, starttls or tls"},
	{"RefRequiredWithUsername", "is required with a username"},
	{"RefBulkStopFirst", "it is running — stop it first"},
	{"RefBulkAlreadyStopped", "it is already stopped"},
	{"RefBulkAlreadyPaused", "it is already paused"},
	{"RefBulkAlreadyRunning", "it is already running"},
	{"RefBulkOnlyRunningPause", "it is stopped — only a running task can be paused"},
	{"RefBulkOnlyPausedResume", "it is running — only a paused task can be resumed"},
	{"RefBulkItIs", "it is deleted"},
	{"RefOtherHostPassword", "the URL points to another host: re-enter its password (left masked)"},
	{"RefOtherHostSecrets", "the URL points to another host: re-enter Authorization, X-Token (left masked)"},
	{"RefNodeConnectOffline", "node w1 is running; connected needs it offline"},
	{"RefNodeEnableIdle", "node w1 is offline; enabled needs it idle"},
	{"RefNodeDisableRunning", "node w1 is idle; disabled needs it running"},
	{"RefMasterNoNodeKey", "m1 is the master; it has no node key"},
	{"RefNodeBoundKey", "node w1 is bound to another machine's key; an admin can reset its identity"},
	{"RefNodeManual", "node w1 was added by an admin (manual registration); it is connected from the console and cannot register itself"},
	{"RefMasterNameShared", "\"m1\" is the name of a master; workers and masters never share a name"},
	{"RefNodeExistsCase", "node \"W1\" already exists; names are case-insensitive"},
	{"RefNodeCreatedMeanwhile", "a node named \"w1\" (or differing only in case) was created meanwhile"},
	{"RefAnsweredAsNode", "10.0.0.5:30001 answered as node \"w2\""},
	{"RefAnsweredNoBootID", "10.0.0.5:30001 answered without a boot id"},
	{"RefConnectNoSecret", "node w1: connect answer names node \"w2\" and carries no secret"},
	{"RefHostInvalid", "\"bad_host!\" is not a valid IP address or host name"},
	{"RefHostEmpty", "host part is empty"},
	{"RefNodeNameChars", "may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit"},
	{"RefPortRange", "port must be a number from 1 to 65535"},
	{"RefLanguageInvalid", "must be empty, en or zh-CN"},
	{"RefControlChar", "holds a control character (line break, tab, NUL) or invalid UTF-8"},
	{"RefAfterCursor", "after must be the next cursor a previous page answered with"},
	{"RefMigrationsLacking", "the database lacks 2 migration(s) of this build (first: 0042_pools.sql): run \"schedulemaster migrate\" or restart this master"},
	{"RefExternalBadName", "the ldap user name \"a b\" cannot be a ScheduleMaster user name: it may only contain letters, digits, dot, underscore and hyphen"},
	{"RefExternalNoGroup", "bob is in no ldap group that grants a ScheduleMaster role (admin, viewer or a project role); ask your directory's administrator"},
	{"RefExternalLocalExists", "a local user named bob already exists (names compare without case), so the oidc account Bob cannot sign in; an admin can rename or delete the local user"},
	{"RefExternalNameTaken", "a user named Bob (compared without case) already exists and could not be matched to this ldap account; an admin can rename or delete it"},
	{"RefExternalOtherPerson", "user bob belongs to another person of the oidc provider; an admin can rename or delete it"},
	{"RefSelMoreRequirements", "more than 20 requirements"},
	{"RefSelExpectedAfterReq", "expected \",\" or the end after a requirement, found \"zone\""},
	{"RefSelExpectedKey", "expected a key, found the end"},
	{"RefSelTokenMsg", "\"Bad_\": key must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"},
	{"RefSelExpectedValueAfter", "expected a value after \"=\", found the end"},
	{"RefSelOperator", "operator \"exists\" is not supported (use =, ==, !=, in or notin)"},
	{"RefSelExpectedOp", "expected \"=\", \"==\", \"!=\", \"in\", \"notin\", \",\" or the end after key \"zone\", found \"eu\""},
	{"RefSelExpectedParen", "expected \"(\" after \"in\", found \"a\""},
	{"RefSelExpectedListValue", "expected a value in the list, found \")\" (values in a list are not empty)"},
	{"RefSelExpectedListSep", "expected \",\" or \")\" in the list, found the end"},
	{"RefSelControlChar", "control character U+0009 (only spaces separate tokens)"},
	{"RefSelCanonicalLonger", "longer than 512 bytes in canonical form (600)"},
	{"RefSelTheEnd", "the end"},
	{"RefNodeAnsweredWith", "node w1 answered /api/run/kill with 404: no such run in progress on this node"},
	{"RefNodeBadAddress", "node w1 has a bad address http://10.0.0.5:x"},
	{"RefNodeUnreachable", "node w1 at 10.0.0.5:30001 is unreachable (connection refused)"},
	{"RefNodeAnswerUnfinished", "node w1 did not finish its answer to /api/task/start (no answer in time)"},
	{"RefNodeAnswerUnreadable", "node w1 gave an answer to /api/task/start that the master cannot read"},
	{"RefNodeCallFailed", "the call of /api/task/start on node w1 failed"},
	{"RefNodeBatchResults", "node w1 answered 2 results for a batch of 3 runs"},
	{"RefDispatchFailedStart", "start failed on node w1, w2: node w1 at 10.0.0.5:30001 is unreachable (connection refused)"},
	{"RefDispatchFailedStop", "stop failed on node w1, w2: node w1 at 10.0.0.5:30001 is unreachable (connection refused)"},
	{"RefDispatchFailedPause", "pause failed on node w1, w2: node w1 at 10.0.0.5:30001 is unreachable (connection refused)"},
	{"RefDispatchFailedResume", "resume failed on node w1, w2: node w1 at 10.0.0.5:30001 is unreachable (connection refused)"},
	{"RefNetRefused", "connection refused"},
	{"RefNetReset", "connection reset"},
	{"RefNetUnknownHost", "unknown host"},
	{"RefNetNoAnswer", "no answer in time"},
	{"RefNetCanceled", "request canceled"},
	{"RefNetError", "network error"},
	{"RefRunNotOnNode", "no such run in progress on this node"},
	{"RefDBUnreachableWithin", "the database is unreachable (no answer within 2s); retrying"},
	{"RefDBUnreachable", "the database is unreachable; retrying"},
	{"RefMigrationsUnreadable", "the database's migrations cannot be read; retrying"},
	{"RefBareInvalid", "invalid input"},
	{"RefBareDuplicate", "already exists"},
	{"RefBareState", "not allowed in this state"},
	{"RefBareWorker", "worker call failed"},
	{"RefBareUnauthorized", "unauthorized"},
	{"RefBareLimited", "too many attempts"},
	{"RefBareTooLarge", "too large"},
	{"RefBareBusy", "busy"},
	{"RefBareUnavailable", "unavailable"},
	{"RefWhoNoExecutor", "no executor"},
	{"RefWhoExecutorsAndMore", "executors: w1, w2; selector pool=billing selects no worker"},
	{"RefWhoExecutors", "executors: w1, w2"},
	{"RefWhoSelectorNone", "selector pool=billing selects no worker"},
	{"RefWhoSelector", "selector pool=billing selects w1, w2"},
	{"RefWorkflowRunNotFound", "workflow run 01J9ZY does not exist"},
	{"RefWorkflowNotFound", "workflow 01J9ZX does not exist"},
	{"RefBackfillNotFound", "backfill 01J9ZW does not exist"},
	{"RefWorkflowMoved", "workflow 5c1e changed since version 1 (it is at version 2, saved 2030-01-02T03:04:05Z); reload it and make your change again"},
	{"RefWorkflowSavedMeanwhile", "workflow 5c1e was saved by someone else meanwhile; reload it and make your change again"},
	{"RefWorkflowPausedAlready", "workflow 5c1e is paused already"},
	{"RefWorkflowNotPaused", "workflow 5c1e is not paused"},
	{"RefBackfillCannotPause", "backfill 7a2b is done: it cannot pause"},
	{"RefBackfillCannotResume", "backfill 7a2b is running: it cannot resume"},
	{"RefBackfillCannotCancel", "backfill 7a2b is cancelled: it cannot cancel"},
	{"RefWorkflowRunEnded", "workflow run 9f3c is not in progress: it ended as failed"},
	{"RefWorkflowRerunState", "workflow run 9f3c is success: only a failed, timed out or cancelled run is run again"},
	{"RefTextNoControl", "must be text (UTF-8, no control characters)"},
	{"RefMustAtMostChars", "must be at most 200 characters"},
	{"RefWorkflowKey", "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"},
	{"RefFromNone", "must be from 0 (none) to 168h"},
	{"RefAtMostParamsShort", "at most 100 params"},
	{"RefParamName", "param \"1x\": a name is letters, digits and '_', not starting with a digit"},
	{"RefParamValue", "param \"BODY\": a value is text of at most 4096 bytes"},
	{"RefAtLeastOneStep", "a workflow has at least one step"},
	{"RefTooManySteps", "501 steps: at most 500"},
	{"RefTooManyStepsForm", "501 steps or more: at most 500"},
	{"RefStepName", "must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'"},
	{"RefStepNameTaken", "step \"load\" is steps[1] already: each step has its own name"},
	{"RefStepTaskRequired", "is required: the task the step runs"},
	{"RefStepTaskNotInProject", "task 01J9ZX does not exist in this workflow's project"},
	{"RefStepBroadcast", "a task with broadcast routing cannot be a step yet: its runs on every executor are not one step's run"},
	{"RefStepTimeout", "must be 0 (the task's) or from 100ms to 24h0m0s"},
	{"RefStepWaitsForItself", "step \"load\" waits for itself"},
	{"RefNoStepNamed", "no step is named \"lode\""},
	{"RefStepWaitsTwice", "step \"load\" waits for \"extract\" twice: one edge per parent"},
	{"RefEdgeOn", "must be success, failure or always"},
	{"RefStepCycle", "the steps wait for each other in a cycle: load → extract → load"},
	{"RefStepNeverRuns", "step \"report\" can never run: it needs step \"load\" to both succeed and fail"},
	{"RefWorkflowKeyTaken", "workflow “nightly etl” has this key already"},
	{"RefBackfillNoSchedule", "the workflow has no schedule: a backfill runs the fires of a schedule in a window"},
	{"RefWindowStartRequired", "is required: the window's start"},
	{"RefWindowEndRequired", "is required: the window's end"},
	{"RefAfterFrom", "must be after from"},
	{"RefBackfillFuture", "is in the future: a backfill runs past fires (the schedule runs the others)"},
	{"RefBackfillNoFire", "the schedule has no fire from 2030-01-01T00:00:00Z to 2030-01-01T01:00:00Z"},
	{"RefBackfillTooMany", "the window holds more than 10000 fires: a backfill runs at most 10000; split it"},
	{"RefNoteQueued", "waits for the run in progress (overlap policy queue)"},
	{"RefNoteQueueFull", "a run was in progress and another waited already (overlap policy queue: one waits)"},
	{"RefNoteOverlapSkip", "a run was still in progress (overlap policy skip)"},
	{"RefNoteMissedRunOnce", "3 fires were missed from 2030-01-02T03:00:00+01:00 to 2030-01-04T03:00:00+01:00 while no master ran the schedule; this run stands for the first (misfire policy run_once)"},
	{"RefNoteMissedSkip", "3 fires were missed from 2030-01-02T03:00:00+01:00 to 2030-01-04T03:00:00+01:00 while no master ran the schedule (misfire policy skip)"},
	{"RefNoteManyMissedRunOnce", "more than 10000 fires were missed from 2030-01-02T03:00:00Z while no master ran the schedule; this run stands for the first (misfire policy run_once)"},
	{"RefNoteManyMissedSkip", "more than 10000 fires were missed from 2030-01-02T03:00:00Z while no master ran the schedule (misfire policy skip)"},
}

// keptEnglish are the words a Chinese refusal keeps in English on purpose:
// field and JSON names, values, flags and units the glossary leaves as they
// are.
var keptEnglish = strings.Fields(`
	http https shell cron interval once start_at end_at spread epoch H
	allow skip queue run_once wait weighted round_robin failover least_busy hash broadcast
	GET POST PUT PATCH DELETE HEAD OPTIONS URL UTF NUL KiB MiB ms s m h d DNS IANA RFC IP
	Europe Berlin America New_York Go KEY key value pool billing example com e g
	application json x www form urlencoded content_type JSON delay at status result
	admin viewer owner editor operator none starttls tls role disabled password email
	ops scheduler allow-shell API T Z every host port default timezone x-www-form-urlencoded
	in notin en zh-CN after ScheduleMaster schedulemaster migrate U ID
	yearly monthly weekly daily hourly a-b n steps success failure always
	nats amqp mqtt redis kafka sql grpc postgres mysql allow-types`)

var englishWord = regexp.MustCompile(`[A-Za-z][A-Za-z_]*(?:-[A-Za-z_]+)*`)

// sampleData collects the words of the user data in msg: the groups of its
// pattern, except those holding another known sentence, whose own data
// counts instead.
func sampleData(msg string, into map[string]bool) {
	for _, r := range refusalTexts {
		m := r.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		for i, n := range r.names {
			if nestedGroups[n] && known(m[i+1]) {
				sampleData(m[i+1], into)
				continue
			}
			for _, w := range englishWord.FindAllString(m[i+1], -1) {
				into[w] = true
			}
		}
		return
	}
}

func known(msg string) bool {
	for _, r := range refusalTexts {
		if r.re.MatchString(msg) {
			return true
		}
	}
	return false
}

func TestRefusalSamplesAreSaidInChineseAndUnchangedInEnglish(t *testing.T) {
	missing := func(lang, id string) { t.Errorf("%s lacks message %s", lang, id) }
	en, zh := locale.New(locale.EN, missing), locale.New(locale.ZH, missing)
	kept := map[string]bool{}
	for _, w := range keptEnglish {
		kept[w] = true
	}
	sampled := map[string]bool{}
	for _, s := range refusalSamples {
		sampled[s.id] = true
		first := ""
		for _, r := range refusalTexts {
			if r.re.MatchString(s.msg) {
				first = r.id
				break
			}
		}
		if first != s.id {
			t.Errorf("%q is said with %q, want %s", s.msg, first, s.id)
			continue
		}
		if got := RefusalIn(en, s.msg); got != s.msg {
			t.Errorf("English page changed %q into %q", s.msg, got)
		}
		// The English catalog text, filled with the groups, is the
		// sentence itself: the pattern and the catalog say the same thing.
		if got := refusalIn(en, s.msg, 0); got != s.msg {
			t.Errorf("%s in English renders %q, the engine wrote %q", s.id, got, s.msg)
		}
		got := RefusalIn(zh, s.msg)
		if got == s.msg || got == "" {
			t.Errorf("%s: %q stays untranslated on a Chinese page", s.id, s.msg)
			continue
		}
		data := map[string]bool{}
		sampleData(s.msg, data)
		for _, w := range englishWord.FindAllString(got, -1) {
			if !data[w] && !kept[w] {
				t.Errorf("%s: Chinese %q keeps the English word %q", s.id, got, w)
			}
		}
	}
	for _, r := range refusalTexts {
		if !sampled[r.id] {
			t.Errorf("pattern %s has no sample sentence", r.id)
		}
	}
}

func TestRefusalNestedSentencesAreTranslatedInTurn(t *testing.T) {
	zh := locale.New(locale.ZH, func(lang, id string) { t.Errorf("%s lacks message %s", lang, id) })
	got := RefusalIn(zh, `label "pool=a,pool=b": key "pool" is given twice`)
	if want := `标签 "pool=a,pool=b"：键 "pool" 出现了两次`; got != want {
		t.Errorf("nested refusal = %q, want %q", got, want)
	}
	// No space is left between two Chinese characters where an inner
	// sentence is put in; user data keeps its own spaces.
	for msg, want := range map[string]string{
		`selector "zone in (a": at character 11: expected "," or ")" in the list, found the end`: `选择器 "zone in (a"：第 11 个字符处：列表中应为 "," 或 ")"，却遇到结尾`,
		"the first admin's password must be at least 12 characters":                              "第一个管理员的密码至少 12 个字符",
		`selector "a b": at character 3: expected "," or the end after a requirement, found "b"`: `选择器 "a b"：第 3 个字符处：条件之后应为 "," 或结尾，却遇到 "b"`,
	} {
		if got := RefusalIn(zh, msg); got != want {
			t.Errorf("RefusalIn(%q) = %q, want %q", msg, got, want)
		}
	}
	// A sentence built to nest deeper than the bound still ends.
	deep := strings.Repeat("pool key: ", 50) + "key is empty"
	if got := RefusalIn(zh, deep); !strings.HasPrefix(got, "节点池的键：") {
		t.Errorf("deep refusal = %q", got)
	}
}
