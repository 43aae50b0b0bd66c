package handlers

// The OpenAPI document (openapi.json) is generated from the table below and
// the Go types the handlers answer with, so its schemas are the answers'
// own. Regenerate it after changing a route or an answer:
//
//	SM_UPDATE_OPENAPI=1 go test -run TestOpenAPIDocumentIsGenerated ./handlers
//
// TestOpenAPIDocumentIsGenerated fails while the committed file differs;
// handlers_test's TestOpenAPICoversRoutes and TestOpenAPIValidatesAnswers
// hold the document to the router and to real answers.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiOp is one operation of the document.
type apiOp struct {
	method, path string // path as OpenAPI writes it: /api/v1/nodes/{name}
	tag          string
	summary      string
	auth         string // "user" (any signed-in user), "admin" (cluster admins), "reader" (cluster admins and viewers of every project), "project" (a role in the object's project), "open", "cluster"
	query        []apiParam
	body         any // a value of the request body's type; nil: no body
	bodyYAML     bool
	example      string // a request body that the schema accepts
	status       int    // success status
	also         []int  // other success statuses with the same body
	resp         any    // a value of the answer's type; nil: no body
	respYAML     bool
	respInput    bool // the answer is a document a request may send back: nothing is required
	loose        bool // the answer may carry fields not named here (probes)
	deprecated   bool
	errors       []int
	notes        string
}

type apiParam struct {
	name, typ, desc string
}

// Answers built from gin.H in the handlers, typed here as they are written.
type (
	itemsOf[T any] struct {
		Items []T `json:"items"`
	}
	listOf[T any] struct {
		Items       []T  `json:"items"`
		Total       int  `json:"total"`
		TotalCapped bool `json:"total_capped,omitempty"`
	}
	// pageOf is a list that pages by cursor too: next is the ?after= of
	// the following page, absent on the last one.
	// total_capped says total is where counting stopped
	// (master.ListCountCap): more match.
	pageOf[T any] struct {
		Items       []T    `json:"items"`
		Total       int    `json:"total"`
		TotalCapped bool   `json:"total_capped,omitempty"`
		Next        string `json:"next,omitempty"`
	}
	poolsAnswer struct {
		Key   string        `json:"key"`
		Pools []master.Pool `json:"pools"`
	}
	runOutputAnswer struct {
		ID           string `json:"id"`
		Result       string `json:"result"`
		InProgress   bool   `json:"in_progress"`
		Output       string `json:"output"`
		BinaryOutput bool   `json:"binary_output"`
		OutputBytes  *int64 `json:"output_bytes,omitempty"`
		Waiting      string `json:"waiting,omitempty"`
		Killing      bool   `json:"killing,omitempty"`
		Unavailable  string `json:"unavailable,omitempty"`
	}
	killAnswer struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	// bulkBody is either an action on ids or tasks to save (and start).
	bulkBody struct {
		Action string             `json:"action,omitempty"`
		IDs    []string           `json:"ids,omitempty"`
		Tasks  []master.TaskInput `json:"tasks,omitempty"`
		Start  bool               `json:"start,omitempty"`
	}
	// bulkItem is one task's outcome: an action's (master.BulkResult) or
	// a save's (master.SaveResult).
	bulkItem struct {
		Index      *int                 `json:"index,omitempty"`
		Action     string               `json:"action,omitempty"`
		ID         string               `json:"id,omitempty"`
		Title      string               `json:"title,omitempty"`
		OK         bool                 `json:"ok"`
		Error      string               `json:"error,omitempty"`
		Refused    bool                 `json:"refused,omitempty"`
		Fields     protocol.FieldErrors `json:"fields,omitempty"`
		Started    bool                 `json:"started,omitempty"`
		StartError string               `json:"start_error,omitempty"`
	}
	bulkAnswer struct {
		Results []bulkItem `json:"results"`
	}
	delayedBatchBody struct {
		Tasks []master.DelayedInput `json:"tasks"`
	}
	delayedBatchAnswer struct {
		Results []master.DelayedBatchResult `json:"results"`
	}
	offlineAnswer struct {
		Status string `json:"status"`
	}
	readyAnswer struct {
		Ready bool   `json:"ready"`
		Node  string `json:"node,omitempty"`
		Error string `json:"error,omitempty"`
	}
	errorAnswer struct {
		Error  string               `json:"error"`
		Fields protocol.FieldErrors `json:"fields,omitempty"`
	}
	openAPIAnswer map[string]any
)

var apiPageParams = []apiParam{
	{"limit", "integer", "page size, 1 to 500 (default 50)"},
	{"offset", "integer", "rows to skip, 0 or more"},
}

func withPage(ps ...apiParam) []apiParam { return append(ps, apiPageParams...) }

const taskExample = `{"title":"ping billing","type":"http","schedule":{"kind":"cron","cron":"*/5 * * * *"},
"http":{"method":"POST","url":"https://billing.example/ping","headers":{"X-A":"1"}},"timeout":"30s","retries":2,
"params":{"region":"eu"},"executors":["w1"],"keepers":["admin"],"children":[]}`

// openAPIOps lists every JSON route of the master.
var openAPIOps = []apiOp{
	// Nodes.
	{method: "GET", path: "/api/v1/nodes", tag: "nodes", summary: "List nodes, by name", auth: "user",
		query: []apiParam{{"limit", "integer", "page size, 1 to 1000 (default 500)"}, {"offset", "integer", "nodes to skip"},
			{"selector", "string", "only the nodes a label selector selects"}},
		status: 200, resp: []apiNode{}, errors: []int{400}, notes: "X-Total-Count carries the number of all (selected) nodes."},
	{method: "POST", path: "/api/v1/nodes", tag: "nodes", summary: "Add a manual worker node", auth: "admin",
		body: apiCreateNodeBody{}, example: `{"name":"w3","host":"10.0.0.7:30001","protocol":"http","priority":2,"max_concurrency":20,"labels":{"pool":"billing"}}`,
		status: 201, resp: apiNode{}, errors: []int{400, 409}},
	{method: "GET", path: "/api/v1/nodes/{name}", tag: "nodes", summary: "A node with its health checks", auth: "user",
		query:  []apiParam{{"health_since", "string", "RFC 3339; health checks since then (default an hour ago; a day is kept)"}},
		status: 200, resp: apiNodeDetail{}, errors: []int{400, 404}},
	{method: "PATCH", path: "/api/v1/nodes/{name}", tag: "nodes", summary: "Edit a worker node: the fields given change", auth: "admin",
		body: apiPatchNodeBody{}, example: `{"priority":5,"labels":{"pool":"batch"}}`,
		status: 200, resp: apiNode{}, errors: []int{400, 404, 409}},
	{method: "DELETE", path: "/api/v1/nodes/{name}", tag: "nodes", summary: "Delete a node that does not run", auth: "admin",
		status: 204, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/nodes/{name}/connect", tag: "nodes", summary: "Connect a manual node", auth: "admin",
		status: 200, resp: apiNode{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/nodes/{name}/enable", tag: "nodes", summary: "Let a node run its tasks", auth: "admin",
		status: 200, resp: apiNode{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/nodes/{name}/disable", tag: "nodes", summary: "Stop a node running its tasks", auth: "admin",
		status: 200, resp: apiNode{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/nodes/{name}/reset-identity", tag: "nodes", summary: "Forget the node key bound to the name", auth: "admin",
		status: 200, resp: apiNode{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/nodes/{name}/approve", tag: "nodes", summary: "Let in a node that waits for approval", auth: "admin",
		status: 200, resp: apiNode{}, errors: []int{404}},
	{method: "PUT", path: "/api/v1/nodes/{name}/labels", tag: "nodes", summary: "Set the node's admin labels ({} removes them)", auth: "admin",
		body: apiNodeLabelsBody{}, example: `{"labels":{"pool":"billing","zone":"eu-1"}}`,
		status: 200, resp: apiNode{}, errors: []int{400, 404}},

	// Previews.
	{method: "GET", path: "/api/v1/schedules/preview", tag: "tasks", summary: "The next fires of a schedule", auth: "user",
		query: []apiParam{{"kind", "string", "cron, interval or once"}, {"cron", "string", "cron expression (kind cron)"},
			{"every", "string", "Go duration (kind interval)"}, {"at", "string", "RFC 3339 (kind once)"},
			{"tz", "string", "IANA time zone (default UTC)"}, {"n", "integer", "how many fires"}},
		status: 200, resp: SchedulePreview{}, errors: []int{400}},
	{method: "GET", path: "/api/v1/selectors/preview", tag: "pools", summary: "The workers a label selector selects now", auth: "user",
		query:  []apiParam{{"selector", "string", "label selector, e.g. pool=billing,zone!=eu"}},
		status: 200, resp: master.SelectorMatch{}, errors: []int{400}},

	// Pools.
	{method: "GET", path: "/api/v1/pools", tag: "pools", summary: "The pools one label key forms", auth: "user",
		query:  []apiParam{{"key", "string", "label key (default pool)"}},
		status: 200, resp: poolsAnswer{}, errors: []int{400}},
	{method: "GET", path: "/api/v1/pools/{pool}", tag: "pools", summary: "One pool (key=value; a key's prefix may hold '/')", auth: "user",
		status: 200, resp: master.Pool{}, errors: []int{400}},
	{method: "POST", path: "/api/v1/pools/{pool}/approve", tag: "pools", summary: "Approve a pool: its new workers join without per-node approval", auth: "admin",
		status: 200, resp: master.Pool{}, errors: []int{400, 404}},
	{method: "DELETE", path: "/api/v1/pools/{pool}/approve", tag: "pools", summary: "Withdraw a pool's approval", auth: "admin",
		status: 204, errors: []int{400, 404}},

	// Runs.
	{method: "GET", path: "/api/v1/runs", tag: "runs", summary: "Runs of every task, newest first", auth: "user",
		query: withPage(apiParam{"after", "string", "the next cursor of the previous page (keyset paging; offset is then ignored)"}, apiParam{"project", "string", "only this project"}, apiParam{"result", "string", "success, failed, timeout, skipped, killed or running"},
			apiParam{"state", "string", "another name of result"}, apiParam{"node", "string", "worker name"},
			apiParam{"task", "string", "task id"}, apiParam{"since", "string", "RFC 3339"}, apiParam{"until", "string", "RFC 3339, excluded"}),
		status: 200, resp: pageOf[apiRun]{}, errors: []int{400}},
	{method: "GET", path: "/api/v1/runs/{id}", tag: "runs", summary: "One run with its whole output", auth: "user",
		status: 200, resp: apiRun{}, errors: []int{404}},
	{method: "GET", path: "/api/v1/runs/{id}/output", tag: "runs", summary: "A run's output, so far while it is in progress", auth: "user",
		status: 200, resp: runOutputAnswer{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/runs/{id}/kill", tag: "runs", summary: "End a run in progress as killed", auth: "project",
		status: 202, resp: killAnswer{}, errors: []int{404, 409, 502}},

	// Users and tokens.
	{method: "GET", path: "/api/v1/users", tag: "users", summary: "Every user, by name", auth: "reader",
		status: 200, resp: []apiUser{}},
	{method: "POST", path: "/api/v1/users", tag: "users", summary: "Add a user", auth: "admin",
		body: apiCreateUserBody{}, example: `{"username":"carol","password":"a long passphrase","role":"viewer","email":"carol@example.com"}`,
		status: 201, resp: apiUser{}, errors: []int{400, 409}},
	{method: "GET", path: "/api/v1/users/{username}", tag: "users", summary: "One user", auth: "reader",
		status: 200, resp: apiUser{}, errors: []int{404}},
	{method: "PATCH", path: "/api/v1/users/{username}", tag: "users", summary: "Change a user: all changes or none", auth: "admin",
		body: apiPatchUserBody{}, example: `{"role":"admin","disabled":false}`,
		status: 200, resp: apiUser{}, errors: []int{400, 404, 409}},
	{method: "GET", path: "/api/v1/tokens", tag: "users", summary: "API tokens (never their values)", auth: "user",
		status: 200, resp: []apiToken{}},
	{method: "POST", path: "/api/v1/tokens", tag: "users", summary: "Create an API token of the caller; its value is shown once", auth: "project",
		body: tokenCreateBody{}, example: `{"name":"deploy","expires_at":"2030-01-31T18:00:00Z"}`,
		status: 201, resp: apiToken{}, errors: []int{400}},
	{method: "DELETE", path: "/api/v1/tokens/{id}", tag: "users", summary: "Revoke an API token", auth: "project",
		status: 200, resp: apiToken{}, errors: []int{404, 409}},

	// Projects.
	{method: "GET", path: "/api/v1/projects", tag: "projects", summary: "The projects the caller may read, with the caller's role", auth: "user",
		status: 200, resp: []apiProject{}},
	{method: "POST", path: "/api/v1/projects", tag: "projects", summary: "Create a project", auth: "admin",
		body: master.ProjectInput{}, example: `{"name":"billing","description":"Billing team","pools":["pool=billing"]}`,
		status: 201, resp: apiProject{}, errors: []int{400, 409}},
	{method: "GET", path: "/api/v1/projects/{name}", tag: "projects", summary: "One project", auth: "project",
		status: 200, resp: apiProject{}, errors: []int{404}},
	{method: "PATCH", path: "/api/v1/projects/{name}", tag: "projects", summary: "Change a project: description (owners), pools (cluster admins)", auth: "project",
		body: master.ProjectPatch{}, example: `{"description":"Billing and invoices","pools":["pool=billing","pool=shared"]}`,
		status: 200, resp: apiProject{}, errors: []int{400, 404}},
	{method: "DELETE", path: "/api/v1/projects/{name}", tag: "projects", summary: "Delete an empty project", auth: "admin",
		status: 204, errors: []int{404, 409}},
	{method: "GET", path: "/api/v1/projects/{name}/members", tag: "projects", summary: "A project's members and their roles", auth: "project",
		status: 200, resp: []apiMember{}, errors: []int{404}},
	{method: "PUT", path: "/api/v1/projects/{name}/members/{username}", tag: "projects", summary: "Give a user a role in a project (owners)", auth: "project",
		body: memberBody{}, example: `{"role":"operator"}`,
		status: 200, resp: memberBody{}, errors: []int{400, 404}},
	{method: "DELETE", path: "/api/v1/projects/{name}/members/{username}", tag: "projects", summary: "End a membership (owners)", auth: "project",
		status: 204, errors: []int{404}},

	// Settings.
	{method: "GET", path: "/api/v1/settings", tag: "settings", summary: "The cluster's settings as stored", auth: "admin",
		status: 200, resp: apiSettings{},
		notes: "The SMTP password is never answered (smtp_password_set says whether one is); passwords in URLs are masked. pinned names the health values the master's flags or environment set, with the value in force."},
	{method: "PATCH", path: "/api/v1/settings", tag: "settings", summary: "Change the settings named: the others keep their values", auth: "admin",
		body: master.SettingsPatch{}, example: `{"run_retention_days":14,"prune_offline_after":"7d"}`,
		status: 200, resp: apiSettings{}, errors: []int{400},
		notes: "Validated with the other settings, as the console's form: a bad value changes nothing. smtp_password is write-only (\"\" removes it); a masked URL sent back keeps its password. Every master follows within one health interval."},

	// Events.
	{method: "GET", path: "/api/v1/events", tag: "events", summary: "The event log, newest first", auth: "user",
		query: withPage(apiParam{"after", "string", "the next cursor of the previous page (keyset paging; offset is then ignored)"}, apiParam{"project", "string", "only this project"}, apiParam{"actor", "string", "who"}, apiParam{"action", "string", "action, or its prefix (task.)"},
			apiParam{"target_type", "string", "node, task, user, token, settings or delayed"},
			apiParam{"target", "string", "a target's name or id, or part of a task's title"},
			apiParam{"outcome", "string", "ok or error"}, apiParam{"from", "string", "RFC 3339"}, apiParam{"to", "string", "RFC 3339, excluded"}),
		status: 200, resp: pageOf[apiEvent]{}, errors: []int{400}},

	// Delayed tasks.
	{method: "POST", path: "/api/v1/delayed", tag: "delayed", summary: "Create a delayed task (200: the pending one of the same key)", auth: "project",
		body: master.DelayedInput{}, example: `{"source_app":"shop","topic":"order.remind","content_key":"order-42","delay":"30m",
"notify_url":"https://shop.example/hook","notify_body":"{\"order\":42}","content_type":"application/json","retries":3,"executors":["w1"]}`,
		status: 201, also: []int{200}, resp: apiDelayed{}, errors: []int{400}},
	{method: "POST", path: "/api/v1/delayed/batch", tag: "delayed", summary: "Create many delayed tasks, each on its own", auth: "project",
		body: delayedBatchBody{}, example: `{"tasks":[{"source_app":"shop","topic":"order.remind","content_key":"order-42","delay":"30m","notify_url":"https://shop.example/hook"}]}`,
		status: 200, resp: delayedBatchAnswer{}, errors: []int{400, 403, 413},
		notes: "Up to 10,000 delayed tasks; each is checked and authorized on its own and answered in order: created, the pending one of its key (created false), or refused (error, fields)."},
	{method: "GET", path: "/api/v1/delayed", tag: "delayed", summary: "Delayed tasks, newest first", auth: "user",
		query: withPage(apiParam{"after", "string", "the next cursor of the previous page (keyset paging; offset is then ignored)"}, apiParam{"project", "string", "only this project"}, apiParam{"status", "string", "pending, running, done, failed or cancelled"},
			apiParam{"topic", "string", ""}, apiParam{"source_app", "string", ""}),
		status: 200, resp: pageOf[master.Delayed]{}, errors: []int{400}},
	{method: "GET", path: "/api/v1/delayed/{id}", tag: "delayed", summary: "A delayed task with its runs", auth: "user",
		status: 200, resp: apiDelayed{}, errors: []int{404}},
	{method: "DELETE", path: "/api/v1/delayed/{id}", tag: "delayed", summary: "Cancel a pending delayed task", auth: "project",
		status: 200, resp: apiDelayed{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/delayed/{id}/cancel", tag: "delayed", summary: "Cancel a pending delayed task", auth: "project",
		status: 200, resp: apiDelayed{}, errors: []int{404, 409}},

	// Configuration as code.
	{method: "GET", path: "/api/v1/export", tag: "config", summary: "The desired state of one project's tasks and workflows, as YAML", auth: "user",
		query: []apiParam{{"project", "string", "the project to export (default: default)"},
			{"settings", "boolean", "add the cluster's settings (cluster admins; 403 otherwise)"}},
		status: 200, respYAML: true, respInput: true, resp: master.Document{}, errors: []int{400, 403},
		notes: "Secret params, secret headers and URL passwords are ${ENV:NAME} references, never values; so are the settings' SMTP password and URL passwords. " +
			"A workflow's steps name their tasks by key, or by title; no ids."},
	{method: "POST", path: "/api/v1/apply", tag: "config", summary: "Make the tasks and workflows match a document; answers the plan", auth: "project",
		query: []apiParam{{"project", "string", "the project to apply to (default: default)"}, {"dry_run", "boolean", "plan only, change nothing"}, {"prune", "boolean", "delete the tasks the document does not hold, and the workflows when it has a workflows section"}},
		body:  master.Document{}, bodyYAML: true,
		example: `{"version":1,"dry_run":true,"tasks":[{"key":"ping","title":"ping billing","type":"http","state":"running",
"schedule":{"kind":"interval","every":"1m"},"http":{"url":"https://billing.example/ping"},"executors":["w1"]}]}`,
		status: 200, resp: master.Plan{}, errors: []int{400, 403, 409, 413, 502},
		notes: "A refused document answers 400 naming every task, workflow and field (a step's unknown task: workflows[0] (key etl).steps[1].task), nothing changed. A change that fails midway answers its status with the plan and its error. " +
			"A settings section (the fields of PATCH /api/v1/settings) is applied first, by cluster admins only (403 otherwise, nothing changed)."},
	{method: "GET", path: "/api/v1/openapi.json", tag: "config", summary: "This document", auth: "open",
		status: 200, resp: openAPIAnswer{}},

	// Tasks.
	{method: "GET", path: "/api/v1/tasks", tag: "tasks", summary: "Tasks, newest first", auth: "user",
		query: withPage(apiParam{"after", "string", "the next cursor of the previous page (keyset paging; offset is then ignored)"}, apiParam{"project", "string", "only this project"}, apiParam{"status", "integer", "0 stopped, 1 running, 2 paused"}, apiParam{"title", "string", "part of the title"},
			apiParam{"node", "string", "executor name"}),
		status: 200, resp: pageOf[master.Task]{}, errors: []int{400}},
	{method: "POST", path: "/api/v1/tasks", tag: "tasks", summary: "Create a stopped task", auth: "project",
		body: master.TaskInput{}, example: taskExample, status: 201, resp: master.Task{}, errors: []int{400}},
	{method: "POST", path: "/api/v1/tasks/bulk", tag: "tasks", summary: "Start, pause, resume, stop, delete, create or update many tasks, each on its own", auth: "project",
		body: bulkBody{}, example: `{"action":"start","ids":["0b8c…","3f2a…"]}`, status: 200, resp: bulkAnswer{}, errors: []int{400, 403, 413},
		notes: "Either {\"action\",\"ids\"}: the action done to each task (up to 10,000), or {\"tasks\":[…],\"start\":bool}: each task created (no id) or updated (the id of a stopped task), and started with start. " +
			"Each task is checked and authorized on its own and answered in order (index, ok, error, fields); one refused never stops the others. The work is batched: one call per worker carrying its tasks, one transaction per chunk."},
	{method: "GET", path: "/api/v1/tasks/{id}", tag: "tasks", summary: "One task (secrets masked) with its health", auth: "user",
		status: 200, resp: master.Task{}, errors: []int{404}},
	{method: "PUT", path: "/api/v1/tasks/{id}", tag: "tasks", summary: "Replace a task's definition, in place while it runs", auth: "project",
		body: master.TaskInput{}, example: taskExample, status: 200, resp: master.Task{}, errors: []int{400, 404, 409, 502},
		notes: "A running or paused task switches every running executor to the new definition at once, or none: 502 names the node that failed, and the task keeps its previous definition. " +
			"If-Match: \"3\" (the ETag of GET) or \"version\": 3 names the version the edit started from: a newer one answers 409 naming who saved it. \"note\" says why, for the version the save makes."},
	{method: "DELETE", path: "/api/v1/tasks/{id}", tag: "tasks", summary: "Stop and delete a task; its runs stay", auth: "project",
		status: 204, errors: []int{404, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/start", tag: "tasks", summary: "Start a stopped task on its running executors", auth: "project",
		status: 200, resp: master.Task{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/stop", tag: "tasks", summary: "Stop a task everywhere", auth: "project",
		status: 200, resp: master.Task{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/pause", tag: "tasks", summary: "Keep the schedule, skip the runs", auth: "project",
		status: 200, resp: master.Task{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/resume", tag: "tasks", summary: "Resume a paused task", auth: "project",
		status: 200, resp: master.Task{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/run", tag: "tasks", summary: "Run once now (X-SM-Node names where)", auth: "project",
		status: 200, resp: master.Task{}, errors: []int{404, 409, 502}},
	{method: "POST", path: "/api/v1/tasks/{id}/clone", tag: "tasks", summary: "Store a stopped copy", auth: "project",
		status: 201, resp: master.Task{}, errors: []int{400, 404}},
	{method: "GET", path: "/api/v1/tasks/{id}/versions", tag: "tasks", summary: "A task's kept versions, newest first", auth: "user",
		query:  []apiParam{{"limit", "integer", "page size, 1 to 500 (default 100)"}, {"before", "integer", "list the versions older than this one (next_before of the previous page)"}},
		status: 200, resp: apiTaskVersions{}, errors: []int{400, 404},
		notes: "Every save is a version: who saved it, when, from where (console, api, apply, bulk, restore) and its note. The last task_versions_kept (a setting, default 100) are kept, and every version one of the task's latest 10,000 runs ran."},
	{method: "GET", path: "/api/v1/tasks/{id}/versions/{n}", tag: "tasks", summary: "One version of a task with its definition (secrets masked)", auth: "user",
		status: 200, resp: master.TaskVersion{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/tasks/{id}/versions/{n}/restore", tag: "tasks", summary: "Make a version the task's definition again, as a new version", auth: "project",
		body: restoreBody{}, example: `{"note":"back to the working URL"}`, status: 200, resp: master.Task{}, errors: []int{400, 404, 409, 502},
		notes: "An edit like any other: a running task switches in place on every executor or on none. The body is optional."},
	{method: "GET", path: "/api/v1/tasks/{id}/runs", tag: "runs", summary: "A task's runs, newest first", auth: "user",
		query:  withPage(apiParam{"result", "string", "success, failed, timeout, skipped, killed or running"}),
		status: 200, resp: listOf[apiRun]{}, errors: []int{400}},

	// Workflows.
	{method: "GET", path: "/api/v1/workflows", tag: "workflows", summary: "Workflows, by title, each with its latest run", auth: "user",
		query:  []apiParam{{"q", "string", "keeps the workflows whose title or key holds it (any case; at most 200 characters)"}},
		status: 200, resp: itemsOf[master.Workflow]{}, errors: []int{400}},
	{method: "POST", path: "/api/v1/workflows", tag: "workflows", summary: "Create a workflow", auth: "project",
		body: master.WorkflowInput{}, example: `{"project":"default","title":"nightly etl","steps":[{"name":"extract","task":"TASK-ID"},
{"name":"load","task":"TASK-ID","after":[{"step":"extract"}],"params":{"batch":"{{steps.extract.json.batch_id}}"}},
{"name":"alert","task":"TASK-ID","after":[{"step":"load","on":"failure"}]}]}`,
		status: 201, resp: master.Workflow{}, errors: []int{400, 404},
		notes: "Refused with a field error naming the step: cycles, unknown or foreign tasks, duplicate names, steps that can never run, more than 500 steps."},
	{method: "GET", path: "/api/v1/workflows/{id}", tag: "workflows", summary: "A workflow", auth: "user",
		status: 200, resp: master.Workflow{}, errors: []int{404}},
	{method: "PUT", path: "/api/v1/workflows/{id}", tag: "workflows", summary: "Replace a workflow's definition", auth: "project",
		body: master.WorkflowInput{}, example: `{"title":"nightly etl","steps":[{"name":"extract","task":"TASK-ID"}]}`,
		status: 200, resp: master.Workflow{}, errors: []int{400, 404, 409},
		notes: "Runs in progress keep the definition they started with. If-Match (or \"version\") names the version the edit started from."},
	{method: "DELETE", path: "/api/v1/workflows/{id}", tag: "workflows", summary: "Delete a workflow (its runs stay readable)", auth: "project",
		status: 204, errors: []int{404}},
	{method: "POST", path: "/api/v1/workflows/{id}/run", tag: "workflows", summary: "Run a workflow now, with params", auth: "project",
		body: runNowBody{}, example: `{"params":{"day":"2026-11-28"}}`, status: 201, resp: master.WorkflowRun{}, errors: []int{400, 404}},
	{method: "GET", path: "/api/v1/workflows/{id}/runs", tag: "workflows", summary: "A workflow's runs, newest first", auth: "user",
		status: 200, resp: itemsOf[master.WorkflowRun]{}, errors: []int{404}},
	{method: "GET", path: "/api/v1/workflow-runs/{id}", tag: "workflows", summary: "A workflow run and the state of each step", auth: "user",
		status: 200, resp: master.WorkflowRun{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/workflow-runs/{id}/cancel", tag: "workflows", summary: "Cancel a run: kill its steps in progress, skip the rest", auth: "project",
		status: 200, resp: master.WorkflowRun{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/workflow-runs/{id}/rerun", tag: "workflows", summary: "Run an ended run's failed steps again, keeping the successful ones", auth: "project",
		status: 201, resp: master.WorkflowRun{}, errors: []int{404, 409},
		notes: "A new run (rerun_of names the old one) with the same logical time and params: the steps that did not succeed and every step after them run again."},
	{method: "GET", path: "/api/v1/workflows/{id}/versions", tag: "workflows", summary: "A workflow's kept versions, newest first", auth: "user",
		status: 200, resp: itemsOf[master.WorkflowVersion]{}, errors: []int{404}},
	{method: "GET", path: "/api/v1/workflows/{id}/versions/{n}", tag: "workflows", summary: "One version: its definition and what changed from the one before", auth: "user",
		status: 200, resp: master.WorkflowVersion{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/workflows/{id}/versions/{n}/restore", tag: "workflows", summary: "Make a version the workflow's definition again, as a new version", auth: "project",
		body: restoreBody{}, example: `{"note":"back to three shards"}`, status: 200, resp: master.Workflow{}, errors: []int{400, 404, 409},
		notes: "Checked as any edit: the version's tasks must still be the project's. The body is optional."},
	{method: "POST", path: "/api/v1/workflows/{id}/pause", tag: "workflows", summary: "Pause a workflow's schedule (runs in progress go on)", auth: "project",
		status: 200, resp: master.Workflow{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/workflows/{id}/resume", tag: "workflows", summary: "Resume a workflow's schedule from now", auth: "project",
		status: 200, resp: master.Workflow{}, errors: []int{404, 409},
		notes: "The fires of the pause are not run; a backfill runs them when they are wanted."},
	{method: "POST", path: "/api/v1/workflows/{id}/backfills", tag: "backfills", summary: "Run a workflow for every fire of its schedule in a past window", auth: "project",
		body: master.BackfillInput{}, example: `{"from":"2026-11-01T00:00:00Z","to":"2026-11-02T00:00:00Z","max_concurrent":3,"order":"oldest"}`,
		status: 201, resp: master.Backfill{}, errors: []int{400, 404},
		notes: "Each run has its fire as its logical time ({{WORKFLOW_TIME}}). A fire at from is in the window. At most 10,000 fires; refused for a window with none."},
	{method: "GET", path: "/api/v1/workflows/{id}/backfills", tag: "backfills", summary: "A workflow's backfills, newest first", auth: "user",
		status: 200, resp: itemsOf[master.Backfill]{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/tasks/{id}/backfills", tag: "backfills", summary: "Run a task for every fire of its schedule in a past window", auth: "project",
		body: master.BackfillInput{}, example: `{"from":"2026-11-01T00:00:00Z","to":"2026-11-02T00:00:00Z","order":"newest"}`,
		status: 201, resp: master.Backfill{}, errors: []int{400, 404},
		notes: "Each fire is a one-step workflow run of the task with {{WORKFLOW_TIME}} set to the fire."},
	{method: "GET", path: "/api/v1/tasks/{id}/backfills", tag: "backfills", summary: "A task's backfills, newest first", auth: "user",
		status: 200, resp: itemsOf[master.Backfill]{}, errors: []int{404}},
	{method: "GET", path: "/api/v1/backfills/{id}", tag: "backfills", summary: "A backfill, its progress and its runs", auth: "user",
		status: 200, resp: master.Backfill{}, errors: []int{404}},
	{method: "POST", path: "/api/v1/backfills/{id}/pause", tag: "backfills", summary: "Pause a backfill: no further run starts", auth: "project",
		status: 200, resp: master.Backfill{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/backfills/{id}/resume", tag: "backfills", summary: "Resume a paused backfill", auth: "project",
		status: 200, resp: master.Backfill{}, errors: []int{404, 409}},
	{method: "POST", path: "/api/v1/backfills/{id}/cancel", tag: "backfills", summary: "Cancel a backfill: its runs not started are cancelled", auth: "project",
		status: 200, resp: master.Backfill{}, errors: []int{404, 409},
		notes: "Runs in progress go on; each can be cancelled on its own."},

	{method: "GET", path: "/api/v1/connections", tag: "connections", summary: "The connections of the projects you read and those for every project", auth: "user",
		query:  []apiParam{{"project", "string", "only this project's (and those for every project)"}},
		status: 200, resp: itemsOf[master.Connection]{}, errors: []int{404},
		notes: "Secrets are never returned: a connection that has one shows \"********\"."},
	{method: "POST", path: "/api/v1/connections", tag: "connections", summary: "Define a connection (project owners; all_projects: cluster admins)", auth: "project",
		body: master.ConnectionInput{}, example: `{"project":"billing","name":"events","kind":"nats","address":"nats-1:4222,nats-2:4222","user":"sm","secret":"s3cret"}`,
		status: 201, resp: master.Connection{}, errors: []int{400, 403, 404},
		notes: "Kinds: nats, amqp, mqtt, redis, kafka, postgres, mysql, grpc. The secret is stored sealed with a key derived from the cluster key and sent only to the workers that run a task using the connection."},
	{method: "GET", path: "/api/v1/connections/{id}", tag: "connections", summary: "A connection, its secret masked", auth: "user",
		status: 200, resp: master.Connection{}, errors: []int{404}},
	{method: "PUT", path: "/api/v1/connections/{id}", tag: "connections", summary: "Change a connection; the tasks using it are sent again to their workers", auth: "project",
		body: master.ConnectionInput{}, example: `{"name":"events","kind":"nats","address":"nats-1:4222","user":"sm","secret":"********","version":1}`,
		status: 200, resp: master.Connection{}, errors: []int{400, 403, 404, 409},
		notes: "A secret of \"********\" keeps the stored one. If-Match (or version) names the version the edit started from. The name and kind of a connection tasks use cannot change."},
	{method: "DELETE", path: "/api/v1/connections/{id}", tag: "connections", summary: "Delete a connection no task uses", auth: "project",
		status: 204, errors: []int{403, 404, 409}},
	{method: "POST", path: "/api/v1/connections/{id}/test", tag: "connections", summary: "A worker tries the connection and says what the system answered", auth: "project",
		body: connectionTestBody{}, example: `{"node":"w1"}`, status: 200, resp: master.ConnectionTest{}, errors: []int{400, 403, 404, 409, 502},
		notes: "Workers reach the systems, not the master: the node (optional; the first running worker the project may use) must run the connection's task type (--allow-types)."},

	// The cluster API workers call.
	{method: "POST", path: protocol.PathMasterRegister, tag: "cluster", summary: "A worker registers (cluster-key MAC)", auth: "cluster",
		body: protocol.RegisterRequest{}, example: `{"node":{"name":"w1","protocol":"http","host":"10.0.0.5:30001","priority":1,"max_concurrency":20},
"machine_name":"host-1","secret":"` + strings.Repeat("ab", 32) + `","boot_id":"b-1","node_key":"` + strings.Repeat("cd", 32) + `"}`,
		status: 200, resp: protocol.RegisterResponse{}, errors: []int{400, 401, 403}},
	{method: "POST", path: protocol.PathMasterOffline, tag: "cluster", summary: "A worker says it stops (node secret)", auth: "cluster",
		status: 200, resp: offlineAnswer{}, errors: []int{401}},
	{method: "POST", path: protocol.PathMasterTasks, tag: "cluster", summary: "A page of a registered worker's tasks, after a cursor (node secret)", auth: "cluster",
		body: protocol.TasksPageRequest{}, example: `{"after":"0b8c","limit":1000}`,
		status: 200, resp: protocol.TasksPageResponse{}, errors: []int{400, 401, 409, 503}},
	{method: "POST", path: protocol.PathMasterClaim, tag: "cluster", summary: "An executor claims one fire (node secret)", auth: "cluster",
		body: protocol.ClaimRequest{}, example: `{"task_id":"0b8c","fire_at":"2030-01-02T03:04:05Z"}`,
		status: 200, resp: protocol.ClaimResponse{}, errors: []int{400, 401, 403, 503}},
	{method: "POST", path: protocol.PathMasterLock, tag: "cluster", summary: "The old path of claims", auth: "cluster", deprecated: true,
		body: protocol.ClaimRequest{}, example: `{"task_id":"0b8c","fire_at":"2030-01-02T03:04:05Z"}`,
		status: 200, resp: protocol.ClaimResponse{}, errors: []int{400, 401, 403, 503}},
	{method: "POST", path: protocol.PathMasterRuns, tag: "cluster", summary: "A batch of run reports (node secret)", auth: "cluster",
		body: protocol.RunsRequest{}, example: `{"runs":[{"id":"r1","task_id":"0b8c","node":"w1","scheduled_at":"2030-01-02T03:04:05Z",
"started_at":"2030-01-02T03:04:05Z","ended_at":"2030-01-02T03:04:06Z","duration_ms":1000,"result":"success","attempt":1,
"http_status":200,"exit_code":null,"output":"ok","manual":false}]}`,
		status: 200, resp: protocol.RunsResponse{}, errors: []int{400, 401, 413}},

	// Probes.
	{method: "GET", path: "/health", tag: "probes", summary: "200 while the process serves", auth: "open",
		status: 200, resp: masterHealthResponse{}, loose: true},
	{method: "GET", path: "/ready", tag: "probes", summary: "200 when the database answers and this master is not fenced, else 503", auth: "open",
		status: 200, also: []int{503}, resp: readyAnswer{}, loose: true},
}

// schemaGen writes JSON Schemas (2020-12, as OpenAPI 3.1 reads them) of Go
// types as encoding/json writes and reads them.
type schemaGen struct {
	components map[string]any
	types      map[string]reflect.Type // the type of each component, to tell apart types of one name
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[protocol.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

// name is the component name of a struct type: apiNode -> Node; a request
// schema (input) has nothing required and ends in Input unless it says so.
func (g *schemaGen) name(t reflect.Type, input bool) string {
	n := t.Name()
	if i := strings.IndexByte(n, '['); i >= 0 { // listOf[handlers.apiRun]
		inner := n[i+1 : len(n)-1]
		inner = inner[strings.LastIndexByte(inner, '.')+1:]
		n = strings.TrimPrefix(inner, "api") + "List"
	}
	if alias, ok := componentNames[n]; ok {
		n = alias
	}
	n = strings.TrimPrefix(n, "api")
	n = strings.ToUpper(n[:1]) + n[1:]
	if input && !strings.HasSuffix(n, "Input") && !strings.HasSuffix(n, "Body") && !strings.HasSuffix(n, "Request") {
		n += "Input"
	}
	if other, ok := g.types[n]; ok && other != t {
		pkg := t.PkgPath()[strings.LastIndexByte(t.PkgPath(), '/')+1:]
		n = strings.ToUpper(pkg[:1]) + pkg[1:] + n
	}
	g.types[n] = t
	return n
}

// componentNames names the components whose type's name would mislead.
var componentNames = map[string]string{"apiDelayed": "DelayedWithRuns", "Info": "BuildInfo"}

// schema returns the schema of t, a $ref for named structs.
func (g *schemaGen) schema(t reflect.Type, input bool) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durationType:
		return map[string]any{"type": "string", "description": "a Go duration: 30s, 5m, 1h30m"}
	case t == rawType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.schema(t.Elem(), input))
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Slice:
		// A nil slice is written null.
		return map[string]any{"type": []any{"array", "null"}, "items": g.schema(t.Elem(), input)}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": g.schema(t.Elem(), input)}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t, input)
		}
		name := g.name(t, input)
		if _, ok := g.components[name]; !ok {
			g.components[name] = map[string]any{} // a placeholder while fields refer back
			g.components[name] = g.object(t, input)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		return out
	}
	if _, ok := s["type"].([]any); ok {
		return s // already nullable
	}
	if len(s) == 0 {
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// object writes a struct's fields as encoding/json does: embedded structs
// flattened, "-" left out, omitempty fields not required.
func (g *schemaGen) object(t reflect.Type, input bool) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := props[name]; dup {
				continue // the outer field wins, as in encoding/json
			}
			props[name] = g.schema(f.Type, input)
			if !input && !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		slices.Sort(required)
		out["required"] = required
	}
	return out
}

var pathParamRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// buildOpenAPI writes the document.
func buildOpenAPI() ([]byte, error) {
	g := &schemaGen{components: map[string]any{}, types: map[string]reflect.Type{}}
	g.components["Error"] = g.object(reflect.TypeFor[errorAnswer](), false)
	paths := map[string]map[string]any{}
	errResponses := map[string]any{}
	for _, op := range openAPIOps {
		o := map[string]any{"tags": []string{op.tag}, "summary": op.summary,
			"operationId": operationID(op.method, op.path)}
		if op.notes != "" {
			o["description"] = op.notes
		}
		if op.deprecated {
			o["deprecated"] = true
		}
		switch op.auth {
		case "open", "cluster":
			o["security"] = []any{}
		case "admin":
			o["description"] = strings.TrimSpace("Cluster admins only. " + op.notes)
		case "reader":
			o["description"] = strings.TrimSpace("Cluster admins and viewers of every project only. " + op.notes)
		case "project":
			o["description"] = strings.TrimSpace("Authorized by the caller's role in the object's project now (owner, editor, operator, viewer; see the manual's role table, docs/teams.md); an object of a project the caller may not read answers 404. " + op.notes)
		}
		var params []any
		for _, m := range pathParamRE.FindAllStringSubmatch(op.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range op.query {
			p := map[string]any{"name": q.name, "in": "query", "schema": map[string]any{"type": q.typ}}
			if q.desc != "" {
				p["description"] = q.desc
			}
			params = append(params, p)
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if op.body != nil {
			s := g.schema(reflect.TypeOf(op.body), true)
			content := map[string]any{"application/json": map[string]any{"schema": s, "example": json.RawMessage(op.example)}}
			if op.bodyYAML {
				content["application/yaml"] = map[string]any{"schema": s}
			}
			o["requestBody"] = map[string]any{"required": true, "content": content}
		}
		responses := map[string]any{}
		for _, st := range append([]int{op.status}, op.also...) {
			r := map[string]any{"description": httpText(st)}
			if op.resp != nil {
				s := g.schema(reflect.TypeOf(op.resp), op.respInput)
				if op.loose {
					s = loosen(g, s)
				}
				switch {
				case op.respYAML:
					r["content"] = map[string]any{"application/yaml": map[string]any{"schema": s}}
				case reflect.TypeOf(op.resp) == reflect.TypeFor[openAPIAnswer]():
					r["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
				default:
					r["content"] = map[string]any{"application/json": map[string]any{"schema": s}}
				}
			}
			responses[fmt.Sprint(st)] = r
		}
		errs := op.errors
		switch op.auth {
		case "user":
			errs = append(errs, 401)
		case "admin", "reader", "project":
			errs = append(errs, 401, 403)
		}
		if op.auth != "open" {
			errs = append(errs, 500, 503)
		}
		for _, st := range errs {
			responses[fmt.Sprint(st)] = map[string]any{"$ref": fmt.Sprintf("#/components/responses/Error%d", st)}
			errResponses[fmt.Sprintf("Error%d", st)] = map[string]any{"description": httpText(st),
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
		}
		o["responses"] = responses
		if paths[op.path] == nil {
			paths[op.path] = map[string]any{}
		}
		paths[op.path][strings.ToLower(op.method)] = o
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "ScheduleMaster master API",
			"version": "1",
			"description": "The master's JSON API: the open API for scripts (/api/v1, a bearer token or a console session), " +
				"the cluster API its workers call (/api/worker, authenticated by the cluster key's MAC or the node's secret), " +
				"and the probes. Generated from the handlers' Go types (handlers/openapi_gen_test.go).",
		},
		"tags": []any{
			map[string]any{"name": "nodes", "description": "Masters and workers"},
			map[string]any{"name": "tasks", "description": "Scheduled tasks; secrets are shown masked"},
			map[string]any{"name": "runs", "description": "Runs of tasks"},
			map[string]any{"name": "pools", "description": "Workers grouped by a label"},
			map[string]any{"name": "delayed", "description": "One-time notifications at a due time"},
			map[string]any{"name": "workflows", "description": "Tasks joined into a DAG of steps, run as one"},
			map[string]any{"name": "backfills", "description": "A workflow or task run for every fire of its schedule in a past window"},
			map[string]any{"name": "connections", "description": "Named connections tasks of the types beyond HTTP and shell use; secrets masked"},
			map[string]any{"name": "users", "description": "Users and API tokens"},
			map[string]any{"name": "projects", "description": "Projects, their members and the pools they may run on"},
			map[string]any{"name": "events", "description": "Who did what"},
			map[string]any{"name": "settings", "description": "The cluster's settings, as code (cluster admins)"},
			map[string]any{"name": "config", "description": "Configuration as code: export and apply"},
			map[string]any{"name": "cluster", "description": "Called by workers, not by scripts: registration is signed with the " +
				"cluster key (headers sm_node, sm_timestamp, sm_nonce, sm_signature, and sm_node_signature with the node key); the " +
				"other calls carry the node's name and secret (sm_node, sm_secret)."},
			map[string]any{"name": "probes", "description": "For load balancers and orchestrators; open"},
		},
		"security": []any{map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"schemas":   g.components,
			"responses": errResponses,
			"securitySchemes": map[string]any{
				"bearer":  map[string]any{"type": "http", "scheme": "bearer", "description": "An API token (smt_…)"},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": sessionName, "description": "The console's session cookie (POST /login)"},
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// loosen lets a probe's answer carry more fields than named (another
// version of the master may add some).
func loosen(g *schemaGen, s map[string]any) map[string]any {
	ref, _ := s["$ref"].(string)
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	if c, ok := g.components[name].(map[string]any); ok {
		delete(c, "additionalProperties")
	}
	return s
}

func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '-' || r == '.' || r == '{' || r == '}' || r == '_' }) {
		if part == "api" || part == "v1" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func httpText(status int) string {
	switch status {
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 204:
		return "No Content"
	case 400:
		return "Bad input: the error names the fields"
	case 401:
		return "Not signed in, or a bad token"
	case 403:
		return "The caller's role does not allow it"
	case 404:
		return "Not found"
	case 409:
		return "Not allowed in the current state, or a duplicate"
	case 413:
		return "The body is too large"
	case 500:
		return "The master failed; its log says why"
	case 502:
		return "A worker call failed; the error names the node"
	case 503:
		return "The database did not answer in time (Retry-After)"
	}
	return fmt.Sprint(status)
}

// TestOpenAPIDocumentIsGenerated fails while openapi.json is not what the
// table and the types give; SM_UPDATE_OPENAPI=1 rewrites it.
func TestOpenAPIDocumentIsGenerated(t *testing.T) {
	t.Parallel()
	want, err := buildOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SM_UPDATE_OPENAPI") == "1" {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(want, openAPIDoc) {
		t.Fatal("handlers/openapi.json is out of date: run SM_UPDATE_OPENAPI=1 go test -run TestOpenAPIDocumentIsGenerated ./handlers")
	}
}
