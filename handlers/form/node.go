package form

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Node reads the node form: the values as typed, the node's configuration
// and every field error (the numbers that do not parse, and the
// configuration's own rules).
func Node(v url.Values) (views.NodeFields, protocol.NodeConfig, protocol.FieldErrors) {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.NodeFields{Name: trim("name"), Protocol: v.Get("protocol"), Host: trim("host"),
		Priority: trim("priority"), MaxConcurrency: trim("max_concurrency")}
	cfg := protocol.NodeConfig{Name: f.Name, Protocol: f.Protocol, Host: f.Host}
	fe := protocol.FieldErrors{}
	var err error
	if cfg.Priority, err = strconv.Atoi(f.Priority); err != nil {
		fe["priority"] = "must be a whole number"
	}
	if cfg.MaxConcurrency, err = strconv.Atoi(f.MaxConcurrency); err != nil {
		fe["max_concurrency"] = "must be a whole number"
	}
	master.Merge(fe, cfg.Validate())
	return f, cfg, fe
}
