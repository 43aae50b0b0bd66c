package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// selectorPreviewNames bounds the node names the preview lists of each kind.
const selectorPreviewNames = 20

// apiSelectorPreview answers GET /api/v1/selectors/preview?selector= with
// what the selector selects now: {"selector": canonical, "running": [...],
// "others": [...]} (workers by name); a bad selector is a 400 whose error
// points at the character.
func (s *server) apiSelectorPreview(c *gin.Context) {
	match, err := s.m.Pools().MatchSelector(c.Request.Context(), c.Query("selector"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, match)
}

// selectorPreview renders the task form's preview of the workers its
// selector matches, as it is typed in.
func (s *server) selectorPreview(c *gin.Context) {
	sel := c.Query("selector")
	vm := views.SelectorPreviewVM{Blank: strings.TrimSpace(sel) == ""}
	if !vm.Blank {
		match, err := s.m.Pools().MatchSelector(c.Request.Context(), sel)
		switch {
		case err == nil:
			vm.Selector = match.Selector
			vm.Running, vm.MoreRunning = firstNames(match.Running)
			vm.Others, vm.MoreOthers = firstNames(match.Others)
			vm.RunningCount, vm.OthersCount = len(match.Running), len(match.Others)
		case errorStatus(err) == http.StatusBadRequest:
			vm.Error = refusal(c, err)
		default:
			s.serverError(c, err)
			return
		}
	}
	s.render(c, http.StatusOK, views.SelectorPreview(vm))
}

// firstNames is at most selectorPreviewNames names and how many more there are.
func firstNames(names []string) ([]string, int) {
	if len(names) <= selectorPreviewNames {
		return names, 0
	}
	return names[:selectorPreviewNames], len(names) - selectorPreviewNames
}
