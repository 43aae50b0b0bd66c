package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// serverDialects names the database servers several masters share, for the
// sub-tests of the multi-master process tests: MariaDB (SM_TEST_MYSQL_DSN)
// and PostgreSQL (SM_TEST_PG_DSN); each skips without its DSN and fails so
// with SM_TEST_REQUIRE_ALL=1.
var serverDialects = []struct{ dialect, name string }{
	{"mysql", "MariaDB"},
	{"postgres", "PostgreSQL"},
}

// proxiedDB is the --db value dsn (a fresh database of storetest.FreshDSN on
// a server) with its connections going through a Proxy the test controls.
func proxiedDB(t *testing.T, dsn string) (string, *storetest.Proxy) {
	t.Helper()
	if conn, ok := strings.CutPrefix(dsn, "mysql://"); ok {
		cfg, err := mysql.ParseDSN(conn)
		if err != nil {
			t.Fatal(err)
		}
		proxy := storetest.NewProxy(t, cfg.Addr)
		cfg.Addr = proxy.Addr()
		return "mysql://" + cfg.FormatDSN(), proxy
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	return u.String(), proxy
}
