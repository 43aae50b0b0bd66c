package handlers

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// maxBody bounds every JSON request body.
const maxBody = 1 << 20

// bindJSON decodes a bounded JSON body with unknown fields refused, answering
// 400 itself on failure.
func bindJSON(c *gin.Context, v any) bool {
	body, err := readBody(c)
	if err != nil {
		return false
	}
	if err := protocol.DecodeStrict(body, v); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return false
	}
	return true
}

// readBody reads at most maxBody bytes, answering 413 when there are more.
func readBody(c *gin.Context) ([]byte, error) { return readBodyLimit(c, maxBody) }

// readBodyLimit reads at most limit bytes, answering 413 when there are more.
func readBodyLimit(c *gin.Context, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, protocol.ErrorResponse{Error: "request body too large"})
		} else {
			c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "cannot read request body"})
		}
		return nil, err
	}
	return body, nil
}
