package handlers

import (
	"github.com/gin-gonic/gin"
)

// deleteConnection deletes a connection no task uses and shows the list;
// one in use is refused on its page, naming the tasks.
func (s *server) deleteConnection(c *gin.Context) {
	id := c.Param("id")
	ctx := c.Request.Context()
	name := id
	cn, err := s.m.Connections().Get(ctx, id)
	if err == nil {
		name = cn.Name
		err = s.m.Connections().Delete(ctx, id)
	}
	s.consoleAction(c, err, "/connections/"+id, "/connections", tr(c, "FlashConnectionDeleted", "Name", name))
}
