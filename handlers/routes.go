// Package handlers holds the master's gin routes and handlers: console pages
// and fragments, the open API, and the API workers call. The worker's own API
// is in package worker.
package handlers

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/sessions"

	"github.com/schedulemaster-go/schedulemaster/docs"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/static"
)

// MasterDeps is what the master's routes need. The engine is the only way to
// the data: the routes get no store.
type MasterDeps struct {
	Master *master.Master
	Log    *slog.Logger
	// SecureCookies marks session cookies Secure; set it when serving over TLS.
	SecureCookies bool
	// PollInterval is how often the live tables refresh (default 2s).
	PollInterval time.Duration
	// TrustedProxies are the reverse proxies (IPs or CIDRs) whose
	// X-Forwarded-For and X-Real-IP are believed; empty means none, and the
	// client address is always the TCP peer.
	TrustedProxies []string
	// OIDC enables sign-on with an OpenID Connect provider; nil: none.
	OIDC *OIDCConfig
}

type server struct {
	m        *master.Master
	log      *slog.Logger
	sessions *sessions.CookieStore
	poll     string
	metrics  http.Handler // the master's Prometheus metrics; nil: none
	oidc     *oidcClient  // nil: no OIDC sign-on
	secure   bool         // cookies are Secure (TLS)
	// zones are the time zone names the task form suggests, read once.
	zones []string
	// largeBodies holds a place for each large body being decoded.
	largeBodies chan struct{}
	// manual holds the manual's pages (/docs), rendered once each.
	manual *manualPages
}

// NewMasterRouter lists every route of the master: console, open API, worker API.
// Cross-origin unsafe requests are refused before any handler runs.
func NewMasterRouter(ctx context.Context, d MasterDeps) (http.Handler, error) {
	sess, err := newSessionStore(ctx, d.Master, d.SecureCookies)
	if err != nil {
		return nil, err
	}
	if d.PollInterval <= 0 {
		d.PollInterval = 2 * time.Second
	}
	s := &server{m: d.Master, log: d.Log, sessions: sess, poll: "every " + d.PollInterval.String(),
		secure: d.SecureCookies, zones: protocol.TimezoneNames(), largeBodies: make(chan struct{}, maxLargeBodies),
		manual: newManualPages(docs.FS)}
	if d.OIDC != nil {
		s.oidc = &oidcClient{cfg: *d.OIDC}
	}
	if mx := d.Master.Metrics(); mx != nil {
		s.metrics = mx.Handler(d.Log)
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// Nobody is a proxy unless named: otherwise any client could pick its own
	// address with X-Forwarded-For and escape the login throttle.
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		return nil, fmt.Errorf("handlers: trusted proxies: %w", err)
	}
	if len(d.TrustedProxies) == 0 {
		r.ForwardedByClientIP = false
	}
	r.MaxMultipartMemory = 0 // multipart is refused before parsing anyway
	r.Use(gin.Recovery(), securityHeaders, s.localize)
	cop := http.NewCrossOriginProtection()

	// Each audience has its own chain, attached to its group: the order is
	// text checks, then the body limit of the group, then who is asking.

	// Probes and assets: open, bodiless.
	staticFS, _ := fs.Sub(static.FS, ".")
	r.StaticFS("/static", http.FS(staticFS))
	r.GET("/health", s.masterHealth)
	r.GET("/ready", s.masterReady)

	// Metrics: read like the open API (bearer token or session).
	// Cluster-wide counts: for cluster admins and viewers of every project.
	r.GET("/metrics", s.guardText, s.requireUser(true), s.requireClusterReader, s.scrapeMetrics)

	// Cluster API, called by workers: authenticated by cluster-key MAC or
	// node secret in each handler, with its own body limits and per-run
	// validation; no cookies, so no cross-origin check. Each call runs under
	// a deadline shorter than the worker's own (deadline.go).
	cluster := r.Group("/")
	cluster.POST(protocol.PathMasterRegister, deadline(clusterDeadline), s.registerWorker)
	cluster.POST(protocol.PathMasterOffline, deadline(clusterDeadline), s.offlineWorker)
	cluster.POST(protocol.PathMasterTasks, s.workerTasks) // its deadline grows with the page it asks for
	cluster.POST(protocol.PathMasterClaim, deadline(claimDeadline), s.claimFire)
	cluster.POST(protocol.PathMasterLock, deadline(claimDeadline), s.claimFire) // the old path of claims, kept as an alias
	cluster.POST(protocol.PathMasterRuns, deadline(clusterDeadline), s.reportRuns)

	// Authorization: cluster changes (nodes, pools, users, settings,
	// projects) are for cluster admins (requireAdmin, and the engine again);
	// every project object is authorized by the engine with the caller's
	// role in its project now (master.RoleActions), so these routes carry
	// no role check of their own; forms that create in the current project
	// check it first (requireProjectAction) so nobody fills one in vain.

	// Console: pages, forms and htmx fragments, for people with a session.
	// Reads and the login run under requestDeadline.
	console := r.Group("/", s.crossOrigin(cop), s.guardText, readsDeadline)
	open := console.Group("/", s.guardBody(maxFormBody), deadline(requestDeadline))
	open.GET("/login", s.showLogin)
	open.POST("/login", s.login)
	open.POST("/logout", s.logout)
	open.POST("/language", s.switchLanguage)
	open.GET(PathOIDCStart, s.oidcStart)
	open.GET(PathOIDCCallback, s.oidcCallback)

	ui := console.Group("/", s.guardBody(maxFormBody), s.requireUser(false))
	ui.GET("/", func(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/dashboard") })
	ui.GET("/nodes", s.listNodes)
	ui.GET("/nodes/rows", s.nodeRows)
	ui.GET("/nodes/command", s.nodeCommand)
	ui.GET("/nodes/new", s.requireAdmin, s.showNewNode)
	ui.POST("/nodes", s.requireAdmin, s.createNode)
	ui.GET("/nodes/:name/edit", s.requireAdmin, s.showEditNode)
	ui.POST("/nodes/:name", s.requireAdmin, s.updateNode)
	ui.POST("/nodes/:name/connect", s.requireAdmin, s.connectNode)
	ui.POST("/nodes/:name/enable", s.requireAdmin, s.enableNode)
	ui.POST("/nodes/:name/disable", s.requireAdmin, s.disableNode)
	ui.POST("/nodes/:name/delete", s.requireAdmin, s.deleteNode)
	ui.POST("/nodes/:name/reset-identity", s.requireAdmin, s.resetNode)
	ui.POST("/nodes/:name/approve", s.requireAdmin, s.approveNode)
	ui.POST("/nodes/:name/labels", s.requireAdmin, s.setNodeLabels)
	ui.GET("/nodes/:name", s.showNode)
	ui.GET("/nodes/:name/live", s.nodeLive)
	ui.GET("/schedules/preview", s.schedulePreview)
	ui.GET("/selectors/preview", s.selectorPreview)
	ui.GET("/pools", s.listPools)
	ui.POST("/pools/approve", s.requireAdmin, s.approvePool)
	ui.POST("/pools/revoke", s.requireAdmin, s.revokePool)
	ui.GET("/pools/*pool", s.showPool) // key=value; a key's prefix holds a '/'
	ui.GET("/runs", s.listRuns)
	ui.GET("/runs/live", s.runListLive)
	ui.GET("/runs/tasks", s.runTaskChoices)
	ui.GET("/runs/:id", s.showRun)
	ui.GET("/runs/:id/live", s.runLive)
	ui.POST("/runs/:id/kill", s.killRun)
	ui.GET("/tokens", s.listTokens)
	ui.POST("/tokens", s.createToken)
	ui.POST("/tokens/:id/revoke", s.revokeToken)
	ui.GET("/dashboard", s.showDashboard)
	ui.GET("/dashboard/live", s.dashboardLive)
	ui.GET("/users", s.requireClusterReader, s.listUsers)
	ui.POST("/users", s.requireAdmin, s.createUser)
	ui.GET("/users/:username/edit", s.requireAdmin, s.showEditUser)
	ui.POST("/users/:username", s.requireAdmin, s.updateUser)
	ui.POST("/users/:username/password", s.requireAdmin, s.resetUserPassword)
	ui.POST("/users/:username/disable", s.requireAdmin, s.disableUser)
	ui.POST("/users/:username/enable", s.requireAdmin, s.enableUser)
	ui.GET("/account", s.showAccount) // one's own account: viewers too
	ui.POST("/account/password", s.changeOwnPassword)
	ui.POST("/account/email", s.changeOwnEmail)
	ui.POST("/account/locale", s.changeOwnLocale)
	ui.GET("/settings", s.requireClusterReader, s.showSettings)
	ui.POST("/settings", s.requireAdmin, s.saveSettings)
	ui.POST("/settings/test", s.requireAdmin, s.testNotifications)
	ui.GET("/events", s.listEvents)
	ui.GET("/workflow-runs/:id", s.showWorkflowRun)
	ui.GET("/workflow-runs/:id/live", s.workflowRunLive)
	ui.POST("/workflow-runs/:id/cancel", s.cancelWorkflowRun)
	ui.POST("/workflow-runs/:id/rerun", s.rerunWorkflowRun)
	ui.GET("/backfills/:id", s.showBackfill)
	ui.GET("/backfills/:id/live", s.backfillLive)
	ui.POST("/backfills/:id/pause", s.pauseBackfill)
	ui.POST("/backfills/:id/resume", s.resumeBackfill)
	ui.POST("/backfills/:id/cancel", s.cancelBackfill)
	ui.GET("/delayed", s.listDelayed)
	ui.GET("/delayed/rows", s.delayedRows)
	ui.GET("/delayed/new", s.requireProjectAction(master.ActEdit), s.showNewDelayed)
	ui.POST("/delayed", s.createDelayed)
	ui.GET("/delayed/:id", s.showDelayed)
	ui.GET("/delayed/:id/live", s.delayedLive)
	ui.POST("/delayed/:id/cancel", s.cancelDelayed)
	ui.GET("/connections", s.listConnections)
	ui.GET("/connections/new", s.requireProjectAction(master.ActManage), s.showNewConnection)
	ui.POST("/connections", s.createConnection)
	ui.GET("/connections/:id", s.showConnection)
	ui.GET("/connections/:id/edit", s.showEditConnection)
	ui.POST("/connections/:id", s.updateConnection)
	ui.POST("/connections/:id/delete", s.deleteConnection)
	ui.POST("/connections/:id/test", s.testConnection)
	ui.GET("/projects", s.listProjects)
	ui.POST("/projects", s.requireAdmin, s.createProject)
	ui.POST("/projects/switch", s.switchProject)
	ui.GET("/projects/:name", s.showProject)
	ui.POST("/projects/:name", s.updateProject)
	ui.POST("/projects/:name/delete", s.requireAdmin, s.deleteProject)
	ui.POST("/projects/:name/members", s.setProjectMember)
	ui.POST("/projects/:name/members/:username/remove", s.removeProjectMember)
	// The manual, for every signed-in user: /docs is its index; a page's
	// name may hold reference/ (the generated pages).
	ui.GET("/docs", s.showDocs)
	ui.GET("/docs/*page", s.showDocs)

	// Console task forms carry whole task definitions: a larger body.
	uiTasks := console.Group("/tasks", s.guardBody(maxTaskBody), s.requireUser(false))
	uiTasks.GET("", s.listTasks)
	uiTasks.GET("/rows", s.taskRows)
	uiTasks.GET("/new", s.requireProjectAction(master.ActEdit), s.showNewTask)
	uiTasks.GET("/type-fields", s.taskTypeFields)
	uiTasks.GET("/type-runners", s.taskTypeRunners)
	uiTasks.POST("", s.createTask)
	uiTasks.POST("/bulk", s.bulkTasks)
	uiTasks.GET("/:id", s.showTask)
	uiTasks.GET("/:id/runs", s.taskRuns)
	uiTasks.GET("/:id/edit", s.requireTaskAction(master.ActEdit), s.showEditTask)
	uiTasks.GET("/:id/clone", s.requireTaskAction(master.ActEdit), s.showCloneTask)
	uiTasks.POST("/:id", s.updateTask)
	uiTasks.POST("/:id/start", s.startTask)
	uiTasks.POST("/:id/stop", s.stopTask)
	uiTasks.POST("/:id/pause", s.pauseTask)
	uiTasks.POST("/:id/resume", s.resumeTask)
	uiTasks.POST("/:id/run", s.runTask)
	uiTasks.POST("/:id/backfill", s.backfillTask)
	uiTasks.POST("/:id/delete", s.deleteTask)
	uiTasks.GET("/:id/versions", s.showTaskVersions)
	uiTasks.GET("/:id/versions/:n", s.showTaskVersion)
	uiTasks.POST("/:id/versions/:n/restore", s.restoreTaskVersion)

	// Console workflow forms carry whole definitions (up to
	// master.MaxWorkflowSteps steps): the larger body of a task's.
	uiWorkflows := console.Group("/workflows", s.guardBody(maxTaskBody), s.requireUser(false))
	uiWorkflows.GET("", s.listWorkflows)
	uiWorkflows.GET("/new", s.requireProjectAction(master.ActEdit), s.showNewWorkflow)
	uiWorkflows.POST("", s.createWorkflow)
	uiWorkflows.GET("/:id", s.showWorkflow)
	uiWorkflows.GET("/:id/edit", s.showEditWorkflow)
	uiWorkflows.POST("/:id", s.updateWorkflow)
	uiWorkflows.POST("/:id/delete", s.deleteWorkflow)
	uiWorkflows.POST("/:id/run", s.runWorkflow)
	uiWorkflows.POST("/:id/pause", s.pauseWorkflow)
	uiWorkflows.POST("/:id/resume", s.resumeWorkflow)
	uiWorkflows.POST("/:id/backfill", s.backfillWorkflow)

	// Open JSON API, for scripts: a bearer token (or a session).
	apiBase := r.Group("/api/v1", s.crossOrigin(cop), s.guardText, readsDeadline)
	api := apiBase.Group("", s.guardBody(maxOtherJSONBody), s.requireUser(true))
	api.GET("/nodes", s.apiListNodes)
	api.POST("/nodes", s.requireAdmin, s.apiCreateNode)
	api.GET("/nodes/:name", s.apiGetNode)
	api.PATCH("/nodes/:name", s.requireAdmin, s.apiPatchNode)
	api.POST("/nodes/:name/connect", s.requireAdmin, s.apiConnectNode)
	api.POST("/nodes/:name/enable", s.requireAdmin, s.apiEnableNode)
	api.POST("/nodes/:name/disable", s.requireAdmin, s.apiDisableNode)
	api.DELETE("/nodes/:name", s.requireAdmin, s.apiDeleteNode)
	api.POST("/nodes/:name/reset-identity", s.requireAdmin, s.apiResetNode)
	api.POST("/nodes/:name/approve", s.requireAdmin, s.apiApproveNode)
	api.PUT("/nodes/:name/labels", s.requireAdmin, s.apiSetNodeLabels)
	api.GET("/schedules/preview", s.apiSchedulePreview)
	api.GET("/selectors/preview", s.apiSelectorPreview)
	api.GET("/pools", s.apiListPools)
	// A pool is key=value, and a key's prefix holds a '/': catch-all
	// routes; approval is /pools/{key}={value}/approve (POST, DELETE).
	api.GET("/pools/*pool", s.apiGetPool)
	api.POST("/pools/*pool", s.requireAdmin, s.apiApprovePool)
	api.DELETE("/pools/*pool", s.requireAdmin, s.apiRevokePool)
	api.GET("/runs", s.apiSearchRuns)
	api.GET("/runs/:id", s.apiGetRun)
	api.GET("/runs/:id/output", s.apiRunOutput)
	api.POST("/runs/:id/kill", s.apiKillRun)
	api.GET("/users", s.apiListUsers)
	api.GET("/users/:username", s.apiGetUser)
	api.POST("/users", s.requireAdmin, s.apiCreateUser)
	api.PATCH("/users/:username", s.requireAdmin, s.apiPatchUser)
	api.GET("/tokens", s.apiListTokens)
	api.POST("/tokens", s.apiCreateToken)
	api.DELETE("/tokens/:id", s.apiRevokeToken)
	api.GET("/settings", s.requireAdmin, s.apiGetSettings)
	api.PATCH("/settings", s.requireAdmin, s.apiPatchSettings)
	api.GET("/events", s.apiListEvents)
	api.POST("/delayed", s.apiCreateDelayed)
	api.GET("/delayed", s.apiListDelayed)
	api.GET("/delayed/:id", s.apiGetDelayed)
	api.DELETE("/delayed/:id", s.apiCancelDelayed)
	api.POST("/delayed/:id/cancel", s.apiCancelDelayed)
	api.GET("/projects", s.apiListProjects)
	api.POST("/projects", s.requireAdmin, s.apiCreateProject)
	api.GET("/projects/:name", s.apiGetProject)
	api.PATCH("/projects/:name", s.apiPatchProject)
	api.DELETE("/projects/:name", s.requireAdmin, s.apiDeleteProject)
	api.GET("/projects/:name/members", s.apiListProjectMembers)
	api.PUT("/projects/:name/members/:username", s.apiSetProjectMember)
	api.DELETE("/projects/:name/members/:username", s.apiRemoveProjectMember)

	// Configuration as code: documents of every task, up to the document
	// bound. Large bodies (apply, bulk, batches) are authorized before a
	// byte is read: one who may change nothing anywhere is refused unread,
	// and only a few are decoded at once.
	apiBase.GET("/export", s.guardBody(master.MaxDocumentBytes), s.requireUser(true), s.apiExport)
	apiBase.POST("/apply", s.requireUser(true), s.requireAnywhere(master.ActEdit), s.fewLargeBodies,
		s.guardBody(master.MaxDocumentBytes), s.apiApply)
	// The OpenAPI document of these routes: open, like /health.
	apiBase.GET("/openapi.json", s.openAPI)

	// Bulk actions and saves: up to master.MaxBulkTasks tasks in one body.
	apiBase.POST("/tasks/bulk", s.requireUser(true), s.requireAnywhere(master.ActOperate), s.fewLargeBodies,
		s.guardBody(maxBulkBody), s.apiBulkTasks)
	apiBase.POST("/delayed/batch", s.requireUser(true), s.requireAnywhere(master.ActEdit), s.fewLargeBodies,
		s.guardBody(maxBulkBody), s.apiCreateDelayedBatch)
	apiTasks := apiBase.Group("/tasks", s.guardBody(maxTaskBody), s.requireUser(true))
	apiTasks.GET("", s.apiListTasks)
	apiTasks.POST("", s.apiCreateTask)
	apiTasks.GET("/:id", s.apiGetTask)
	apiTasks.PUT("/:id", s.apiUpdateTask)
	apiTasks.DELETE("/:id", s.apiDeleteTask)
	apiTasks.POST("/:id/start", s.apiStartTask)
	apiTasks.POST("/:id/stop", s.apiStopTask)
	apiTasks.POST("/:id/pause", s.apiPauseTask)
	apiTasks.POST("/:id/resume", s.apiResumeTask)
	apiTasks.POST("/:id/run", s.apiRunTask)
	apiTasks.POST("/:id/clone", s.apiCloneTask)
	apiTasks.GET("/:id/runs", s.apiListRuns)
	apiTasks.GET("/:id/versions", s.apiListTaskVersions)
	apiTasks.GET("/:id/versions/:n", s.apiGetTaskVersion)
	apiTasks.POST("/:id/versions/:n/restore", s.apiRestoreTaskVersion)
	apiWorkflows := apiBase.Group("/workflows", s.guardBody(maxTaskBody), s.requireUser(true))
	apiWorkflows.GET("", s.apiListWorkflows)
	apiWorkflows.POST("", s.apiCreateWorkflow)
	apiWorkflows.GET("/:id", s.apiGetWorkflow)
	apiWorkflows.PUT("/:id", s.apiUpdateWorkflow)
	apiWorkflows.DELETE("/:id", s.apiDeleteWorkflow)
	apiWorkflows.POST("/:id/run", s.apiRunWorkflow)
	apiWorkflows.GET("/:id/runs", s.apiListWorkflowRuns)
	apiWorkflows.GET("/:id/versions", s.apiListWorkflowVersions)
	apiWorkflows.GET("/:id/versions/:n", s.apiGetWorkflowVersion)
	apiWorkflows.POST("/:id/versions/:n/restore", s.apiRestoreWorkflowVersion)
	apiWorkflows.POST("/:id/pause", s.apiPauseWorkflow)
	apiWorkflows.POST("/:id/resume", s.apiResumeWorkflow)
	apiWorkflows.POST("/:id/backfills", s.apiBackfillWorkflow)
	apiWorkflows.GET("/:id/backfills", s.apiListWorkflowBackfills)
	apiTasks.POST("/:id/backfills", s.apiBackfillTask)
	apiTasks.GET("/:id/backfills", s.apiListTaskBackfills)
	api.GET("/backfills/:id", s.apiGetBackfill)
	api.POST("/backfills/:id/pause", s.apiPauseBackfill)
	api.POST("/backfills/:id/resume", s.apiResumeBackfill)
	api.POST("/backfills/:id/cancel", s.apiCancelBackfill)
	apiConnections := apiBase.Group("/connections", s.guardBody(maxTaskBody), s.requireUser(true))
	apiConnections.GET("", s.apiListConnections)
	apiConnections.POST("", s.apiCreateConnection)
	apiConnections.GET("/:id", s.apiGetConnection)
	apiConnections.PUT("/:id", s.apiUpdateConnection)
	apiConnections.DELETE("/:id", s.apiDeleteConnection)
	apiConnections.POST("/:id/test", s.apiTestConnection)
	api.GET("/workflow-runs/:id", s.apiGetWorkflowRun)
	api.POST("/workflow-runs/:id/cancel", s.apiCancelWorkflowRun)
	api.POST("/workflow-runs/:id/rerun", s.apiRerunWorkflowRun)

	// Anything else: a 404 in the caller's language (page or JSON), after
	// the same text checks as the console.
	r.NoRoute(s.guardText, s.notFound)
	return r, nil
}

// securityHeaders sets a strict CSP (no inline script or style) and friends.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.Next()
}
