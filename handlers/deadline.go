package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Request deadlines. A master whose database hangs (connections open, no
// answer) must answer 503 with a sentence within them, never hold a request:
// its workers then go to another master and people see why. Each is shorter
// than the deadline of whoever waits for the answer.
const (
	// claimDeadline bounds a claim: a lower-ranked executor waits up to 2 s
	// for a better-ranked one (the engine's maxClaimWait), and the worker
	// gives up after protocol.ClaimTimeout, so the worker hears the 503.
	claimDeadline = protocol.ClaimTimeout - time.Second
	// clusterDeadline bounds the other calls of workers (a batch of run
	// reports, registration, the offline notice): within the worker's
	// protocol.RunsTimeout for a batch.
	clusterDeadline = 10 * time.Second
	// authDeadline bounds the check of a session or an API token, the first
	// database call of every page and API request: a hung database turns
	// into a 503 within it, before the handler starts.
	authDeadline = 3 * time.Second
	// requestDeadline bounds a page, fragment or API read (GET) and a login
	// or logout as a whole. Other writes have no overall deadline: they may
	// call workers (each call bounded by --call-timeout) and are gated by
	// authDeadline; each of their database calls is bounded by the store
	// (store.IOTimeout on MySQL), past which they answer 503.
	requestDeadline = 10 * time.Second
)

// deadline runs the rest of the chain under a request deadline of d.
func deadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// readsDeadline is deadline(requestDeadline) for GET requests only.
func readsDeadline(c *gin.Context) {
	if c.Request.Method != http.MethodGet {
		c.Next()
		return
	}
	deadline(requestDeadline)(c)
}

// timedOut reports whether err comes from the database not answering within
// the request's deadline: the engine says so (KindUnavailable), or the
// request's deadline passed while the call failed for it.
func timedOut(c *gin.Context, err error) bool {
	return master.KindOf(err) == master.KindUnavailable ||
		(master.KindOf(err) == 0 && errors.Is(c.Request.Context().Err(), context.DeadlineExceeded))
}

// unavailable answers a request the database did not answer in time: 503
// with Retry-After and a sentence, as JSON, an htmx fragment's text or a
// page, whichever the request wants.
func (s *server) unavailable(c *gin.Context, err error) {
	s.log.Warn("the database did not answer in time", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	c.Header("Retry-After", strconv.Itoa(int(master.UnavailableRetryAfter/time.Second)))
	switch {
	case wantsJSON(c):
		c.AbortWithStatusJSON(http.StatusServiceUnavailable, protocol.ErrorResponse{Error: master.UnavailableMsg})
	case isHX(c):
		c.Data(http.StatusServiceUnavailable, "text/plain; charset=utf-8", []byte(master.UnavailableMsg))
		c.Abort()
	default:
		// The page renders past the deadline that ended the request.
		c.Request = c.Request.WithContext(context.WithoutCancel(c.Request.Context()))
		s.errorPage(c, http.StatusServiceUnavailable, tr(c, "ErrDBSlowPage"))
	}
}
