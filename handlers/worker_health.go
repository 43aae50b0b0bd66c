package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// health answers the master's probe with the node name and boot id.
func (wa *workerAPI) health(c *gin.Context) {
	c.JSON(http.StatusOK, wa.w.Health())
}
