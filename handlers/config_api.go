package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// apiExport answers GET /api/v1/export: the desired state of the tasks as a
// YAML document (master.Export), secrets as ${ENV:NAME} references;
// ?settings=true adds the cluster's settings (cluster admins).
func (s *server) apiExport(c *gin.Context) {
	withSettings, err := boolQuery(c, "settings")
	if err != nil {
		s.apiError(c, err)
		return
	}
	out, err := s.m.Export(c.Request.Context(), master.ExportOptions{Project: c.Query("project"), Settings: withSettings})
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("Content-Disposition", `inline; filename="schedulemaster-tasks.yaml"`)
	c.Data(http.StatusOK, "application/yaml; charset=utf-8", out)
}

// boolQuery reads an optional true/false query parameter.
func boolQuery(c *gin.Context, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, master.Errorf(master.KindInvalid, "%s must be true or false", name)
	}
	return b, nil
}

// apiApply answers POST /api/v1/apply: the body is a document (YAML or
// JSON); ?dry_run=true (or "dry_run": true in it) plans without changing
// anything, ?prune=true (or "prune": true) deletes the tasks it does not
// hold. The answer is the plan: 200 when it was made (or planned), the
// status of the failure with the plan and its "error" when a change failed
// midway, and a plain 400 naming every task and field when the document is
// refused (nothing changed).
func (s *server) apiApply(c *gin.Context) {
	dry, err := boolQuery(c, "dry_run")
	if err != nil {
		s.apiError(c, err)
		return
	}
	prune, err := boolQuery(c, "prune")
	if err != nil {
		s.apiError(c, err)
		return
	}
	body, err := readBodyLimit(c, master.MaxDocumentBytes)
	if err != nil {
		return
	}
	doc, err := master.ParseDocument(body)
	if err != nil {
		s.apiError(c, err)
		return
	}
	ctx := c.Request.Context()
	plan, err := s.m.Apply(ctx, doc, master.ApplyOptions{DryRun: dry || doc.DryRun, Prune: prune || doc.Prune, By: currentUser(c).Name, Project: c.Query("project")})
	if plan == nil {
		s.apiError(c, err)
		return
	}
	status := http.StatusOK
	if err != nil {
		if status = errorStatus(err); status == 0 || timedOut(c, err) {
			s.log.Error("apply stopped", "err", err)
			status = http.StatusInternalServerError
			if timedOut(c, err) {
				status = http.StatusServiceUnavailable
			}
		}
	}
	s.log.Info("apply", "user", currentUser(c).Name, "dry_run", plan.DryRun, "prune", plan.Prune, "create", plan.Create,
		"update", plan.Update, "unchanged", plan.Unchanged, "delete", plan.Delete, "applied", plan.Applied)
	c.JSON(status, plan)
}
