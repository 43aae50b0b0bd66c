package handlers

import (
	"net"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// nodeCommand refreshes the worker command line while the form is typed in.
func (s *server) nodeCommand(c *gin.Context) {
	if !currentUser(c).ClusterAdmin() {
		s.forbidden(c, "forbidden: only a cluster admin adds nodes")
		return
	}
	s.render(c, http.StatusOK, views.WorkerCommand(s.manualCommand(c, c.Query("name"), c.Query("host"), c.Query("protocol"))))
}

// masterURL is how this request reached the master: what a worker should use.
func masterURL(c *gin.Context) string {
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

// manualCommand is the exact command line for a manual worker named name.
func (s *server) manualCommand(c *gin.Context, name, host, scheme string) string {
	if protocol.ValidateName(name) != "" {
		name = "NAME"
	}
	ip, port := "IP", "PORT"
	if protocol.ValidateHost(host) == "" {
		ip, port, _ = net.SplitHostPort(host)
	}
	if scheme != "https" {
		scheme = "http"
	}
	parts := []string{"schedulemaster worker", "--autor=false", "--workerof=" + s.m.Cluster(),
		"--identity=" + name, "--ip=" + ip, "--port=" + port}
	if scheme == "https" {
		parts = append(parts, "--protocol=https")
	}
	parts = append(parts, "--master="+masterURL(c), "--cluster-key="+s.m.ClusterKey())
	return strings.Join(parts, " ")
}

// autoWorkerCommand is the command line of an auto-registered worker named name.
func autoWorkerCommand(masterURL, key, name string) string {
	return "schedulemaster worker --identity=" + name + " --ip=127.0.0.1 --port=30001 --master=" + masterURL + " --cluster-key=" + key
}
