package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// connect verifies the master's handshake and answers with a new secret.
func (wa *workerAPI) connect(c *gin.Context) {
	var req protocol.ConnectRequest
	if !bindWorkerJSON(c, &req, protocol.MaxSmallBody) {
		return
	}
	h := worker.ConnectHeaders{
		Master:    c.GetHeader(protocol.HeaderMaster),
		NameTo:    c.GetHeader(protocol.HeaderNameTo),
		Timestamp: c.GetHeader(protocol.HeaderTimestamp),
		Nonce:     c.GetHeader(protocol.HeaderNonce),
		MAC:       c.GetHeader(protocol.HeaderConnection),
	}
	resp, err := wa.w.Connect(h, req, time.Now())
	switch {
	case errors.Is(err, protocol.ErrHandshake):
		wa.log.Warn("connect refused", "from", c.ClientIP(), "err", err)
		c.JSON(http.StatusUnauthorized, protocol.ErrorResponse{Error: err.Error()})
	case err != nil:
		c.JSON(http.StatusBadRequest, protocol.ErrorResponse{Error: err.Error()})
	default:
		c.JSON(http.StatusOK, resp)
	}
}
