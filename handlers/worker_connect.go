package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/worker"
)

// connect verifies the master's handshake and answers with a new secret.
func (wa *workerAPI) connect(c *gin.Context) {
	var req worker.ConnectRequest
	if !bindWorkerJSON(c, &req, worker.MaxSmallBody) {
		return
	}
	h := worker.ConnectHeaders{
		Master:    c.GetHeader(worker.HeaderMaster),
		NameTo:    c.GetHeader(worker.HeaderNameTo),
		Timestamp: c.GetHeader(worker.HeaderTimestamp),
		Nonce:     c.GetHeader(worker.HeaderNonce),
		MAC:       c.GetHeader(worker.HeaderConnection),
	}
	resp, err := wa.w.Connect(h, req, time.Now())
	switch {
	case errors.Is(err, worker.ErrHandshake):
		wa.log.Warn("connect refused", "from", c.ClientIP(), "err", err)
		c.JSON(http.StatusUnauthorized, worker.ErrorResponse{Error: err.Error()})
	case err != nil:
		c.JSON(http.StatusBadRequest, worker.ErrorResponse{Error: err.Error()})
	default:
		c.JSON(http.StatusOK, resp)
	}
}
