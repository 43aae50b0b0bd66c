// Package migrations embeds the SQL schema, one folder per database dialect.
package migrations

import "embed"

// FS holds the migrations: mysql/ for MySQL and MariaDB, sqlite/ for SQLite.
//
//go:embed mysql/*.sql sqlite/*.sql
var FS embed.FS
