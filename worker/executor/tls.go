package executor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// TLSConfig is the TLS configuration of c (TLS 1.2 at least), or nil when
// c does not use TLS. The server name defaults to the first address's host.
func TLSConfig(c *protocol.ConnectionSpec) (*tls.Config, error) {
	t := c.TLS
	if t == nil || !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the operator's choice, documented as for tests only
	if cfg.ServerName == "" {
		if addrs := c.Addresses(); len(addrs) > 0 {
			if host, _, err := net.SplitHostPort(addrs[0]); err == nil {
				cfg.ServerName = host
			}
		}
	}
	if t.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CA)) {
			return nil, errors.New("the connection's TLS CA holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
