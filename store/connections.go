package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Connection is a named connection as stored: its secret sealed (the
// master's engine seals and opens it), its TLS settings and options JSON.
type Connection struct {
	bun.BaseModel `bun:"table:connections"`

	ID string `bun:"id,pk"`
	// ProjectID is the project it belongs to; 0: every project (a cluster
	// admin's).
	ProjectID   int64     `bun:"project_id"`
	Name        string    `bun:"name"`
	Kind        string    `bun:"kind"`
	Address     string    `bun:"address"`
	Database    string    `bun:"database_name"`
	User        string    `bun:"user_name"`
	SecretEnc   string    `bun:"secret_enc"`
	TLS         string    `bun:"tls"`
	Options     string    `bun:"options"`
	Description string    `bun:"description"`
	Version     int64     `bun:"version"`
	CreatedBy   string    `bun:"created_by"`
	CreatedAt   time.Time `bun:"created_at"`
	UpdatedAt   time.Time `bun:"updated_at"`
	// HasSecret says, in a list (which leaves SecretEnc out), whether it
	// has a secret.
	HasSecret bool `bun:"has_secret,scanonly"`
}

// maxConnectionsListed bounds a list of connections.
const maxConnectionsListed = 1000

// CreateConnection inserts c; a name its project (or every project)
// already uses is ErrDuplicate.
func CreateConnection(ctx context.Context, db bun.IDB, c *Connection) error {
	now := time.Now().UTC()
	c.CreatedAt, c.UpdatedAt, c.Version = now, now, 1
	if _, err := db.NewInsert().Model(c).Exec(ctx); err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: connection %q: %w", c.Name, ErrDuplicate)
		}
		return fmt.Errorf("store: create connection: %w", err)
	}
	return nil
}

// UpdateConnection writes c over the row at version (ErrConflict when it
// moved on) and moves the version on.
func UpdateConnection(ctx context.Context, db bun.IDB, c *Connection, version int64) error {
	c.UpdatedAt, c.Version = time.Now().UTC(), version+1
	res, err := db.NewUpdate().Model(c).Column("name", "kind", "address", "database_name", "user_name", "secret_enc", "tls", "options",
		"description", "version", "updated_at").Where("id = ?", c.ID).Where("version = ?", version).Exec(ctx)
	if err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: connection %q: %w", c.Name, ErrDuplicate)
		}
		return fmt.Errorf("store: update connection: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: update connection %s: %w", c.ID, ErrConflict)
	}
	return nil
}

// DeleteConnection deletes the connection at version.
func DeleteConnection(ctx context.Context, db bun.IDB, id string, version int64) error {
	res, err := db.NewDelete().TableExpr("connections").Where("id = ?", id).Where("version = ?", version).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: delete connection: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: delete connection %s: %w", id, ErrConflict)
	}
	return nil
}

// GetConnection reads one connection.
func GetConnection(ctx context.Context, db bun.IDB, id string) (*Connection, error) {
	c := new(Connection)
	if err := db.NewSelect().Model(c).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: connection %s: %w", id, notFound(err))
	}
	return c, nil
}

// ListConnections lists the connections of projects (nil: every project;
// 0 in it: those for every project), by project then name, at most
// maxConnectionsListed.
func ListConnections(ctx context.Context, db bun.IDB, projects []int64) ([]Connection, error) {
	var out []Connection
	// The sealed secrets stay in the database: a list says only which
	// connections have one.
	q := db.NewSelect().Model(&out).Column("id", "project_id", "name", "kind", "address", "database_name", "user_name", "tls", "options",
		"description", "version", "created_by", "created_at", "updated_at").ColumnExpr("secret_enc <> '' AS has_secret").
		OrderExpr("project_id, name").Limit(maxConnectionsListed)
	if projects != nil {
		if len(projects) == 0 {
			return nil, nil
		}
		q = q.Where("project_id IN (?)", bun.In(projects))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list connections: %w", err)
	}
	return out, nil
}

// ConnectionsNamed returns, for project, the connections of names it sees:
// its own, else the one for every project of that name; by name.
func ConnectionsNamed(ctx context.Context, db bun.IDB, project int64, names []string) (map[string]*Connection, error) {
	out := make(map[string]*Connection, len(names))
	if len(names) == 0 {
		return out, nil
	}
	var rows []Connection
	if err := db.NewSelect().Model(&rows).Where("project_id IN (?)", bun.In([]int64{0, project})).
		Where("name IN (?)", bun.In(names)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: connections named: %w", err)
	}
	for i := range rows {
		c := &rows[i]
		if cur, ok := out[c.Name]; !ok || (cur.ProjectID == 0 && c.ProjectID != 0) {
			out[c.Name] = c
		}
	}
	return out, nil
}

// TasksUsingConnection lists the ids of the tasks that are not deleted and
// whose definition may name connection name, in project (0: every
// project): a prefilter on the stored spec the caller confirms by
// decoding.
func TasksUsingConnection(ctx context.Context, db bun.IDB, project int64, name string) ([]string, error) {
	var ids []string
	q := db.NewSelect().TableExpr("tasks").Column("id").Where("status <> ?", TaskDeleted).
		Where("spec LIKE ? ESCAPE '!'", `%"connection":"`+escapeLikeBang(name)+`"%`).Limit(10000)
	if project != 0 {
		q = q.Where("project_id = ?", project)
	}
	if err := q.Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("store: tasks using connection %q: %w", name, err)
	}
	return ids, nil
}
