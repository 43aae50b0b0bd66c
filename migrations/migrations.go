// Package migrations embeds the SQL schema, one folder per database dialect.
package migrations

import "embed"

// FS holds the migrations: mysql/ for MySQL and MariaDB, postgres/ for
// PostgreSQL, sqlite/ for SQLite. Each folder has the same migrations under
// the same names.
//
//go:embed mysql/*.sql postgres/*.sql sqlite/*.sql
var FS embed.FS
