package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// DefaultProjectID is the project everything from before projects belongs
// to, and what a task, delayed task or token that names no project goes to.
const DefaultProjectID int64 = 1

// Project is a team's space: its tasks, delayed tasks, tokens and events,
// its members with their roles, and the pools it may run on.
type Project struct {
	bun.BaseModel `bun:"table:projects"`

	ID          int64  `bun:"id,pk,autoincrement"`
	Name        string `bun:"name"`
	Description string `bun:"description"`
	// Pools are the label selectors a cluster admin allowed the project, one
	// per line; "*" allows every node.
	Pools string `bun:"pools"`
	// WebhookURL receives the project's run failures, besides the
	// cluster's webhook ("" for none).
	WebhookURL string    `bun:"webhook_url"`
	CreatedBy  string    `bun:"created_by"`
	CreatedAt  time.Time `bun:"created_at"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

// ProjectMember gives a user a role in a project.
type ProjectMember struct {
	bun.BaseModel `bun:"table:project_members"`

	ProjectID int64     `bun:"project_id,pk"`
	Username  string    `bun:"username,pk"`
	Role      string    `bun:"role"`
	AddedBy   string    `bun:"added_by"`
	AddedAt   time.Time `bun:"added_at"`
}

// CreateProject inserts p; a taken name gives ErrDuplicate.
func CreateProject(ctx context.Context, db bun.IDB, p *Project) error {
	now := time.Now().UTC()
	p.CreatedAt, p.UpdatedAt = now, now
	err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(p).Exec(ctx)
		return err
	})
	if err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: project %q: %w", p.Name, ErrDuplicate)
		}
		return fmt.Errorf("store: create project: %w", err)
	}
	return nil
}

// GetProject returns the project named name.
func GetProject(ctx context.Context, db bun.IDB, name string) (*Project, error) {
	p := new(Project)
	if err := db.NewSelect().Model(p).Where("name = ?", name).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: project %q: %w", name, notFound(err))
	}
	return p, nil
}

// GetProjectByID returns the project with this id.
func GetProjectByID(ctx context.Context, db bun.IDB, id int64) (*Project, error) {
	p := new(Project)
	if err := db.NewSelect().Model(p).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: project %d: %w", id, notFound(err))
	}
	return p, nil
}

// ListProjects returns every project by name. A cluster has few projects
// (one per team), so there is no paging.
func ListProjects(ctx context.Context, db bun.IDB) ([]Project, error) {
	var ps []Project
	if err := db.NewSelect().Model(&ps).OrderExpr("name ASC").Limit(MaxProjects).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list projects: %w", err)
	}
	return ps, nil
}

// MaxProjects bounds the projects of a cluster (and every list of them).
const MaxProjects = 1000

// CountProjects returns how many projects there are.
func CountProjects(ctx context.Context, db bun.IDB) (int, error) {
	n, err := db.NewSelect().Model((*Project)(nil)).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count projects: %w", err)
	}
	return int(n), nil
}

// UpdateProject rewrites a project's description and pools.
func UpdateProject(ctx context.Context, db bun.IDB, p *Project) error {
	p.UpdatedAt = time.Now().UTC()
	res, err := db.NewUpdate().Model(p).Column("description", "pools", "webhook_url", "updated_at").WherePK().Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: update project: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: project %d: %w", p.ID, ErrNotFound)
	}
	return nil
}

// DeleteProject deletes an empty project and its memberships: a project that
// still holds tasks (not deleted), delayed tasks or live tokens gives
// ErrConflict.
func DeleteProject(ctx context.Context, db bun.IDB, id int64) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for _, q := range []*bun.SelectQuery{
			tx.NewSelect().Table("tasks").Where("project_id = ? AND status <> ?", id, TaskDeleted),
			tx.NewSelect().Table("delayed_tasks").Where("project_id = ?", id),
			tx.NewSelect().Table("api_tokens").Where("project_id = ? AND revoked_at IS NULL", id),
		} {
			n, err := q.Count(ctx)
			if err != nil {
				return fmt.Errorf("store: delete project: %w", err)
			}
			if n > 0 {
				return fmt.Errorf("store: project %d is not empty: %w", id, ErrConflict)
			}
		}
		if _, err := tx.NewDelete().Model((*ProjectMember)(nil)).Where("project_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("store: delete project members: %w", err)
		}
		res, err := tx.NewDelete().Model((*Project)(nil)).Where("id = ?", id).Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: delete project: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: project %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// SetProjectMember gives username role in the project, adding or changing
// the membership.
func SetProjectMember(ctx context.Context, db bun.IDB, m *ProjectMember) error {
	m.AddedAt = time.Now().UTC()
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model(m).Column("role").WherePK().Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: set project member: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		err = mayFail(ctx, tx, func(ctx context.Context, db bun.IDB) error {
			_, err := db.NewInsert().Model(m).Exec(ctx)
			return err
		})
		if err != nil {
			if isDuplicate(err) { // the same role was set concurrently
				return nil
			}
			return fmt.Errorf("store: add project member: %w", err)
		}
		return nil
	})
}

// RemoveProjectMember ends username's membership; none gives ErrNotFound.
func RemoveProjectMember(ctx context.Context, db bun.IDB, projectID int64, username string) error {
	res, err := db.NewDelete().Model((*ProjectMember)(nil)).Where("project_id = ? AND username = ?", projectID, username).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: remove project member: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: member %q: %w", username, ErrNotFound)
	}
	return nil
}

// ProjectMembers returns a project's members by user name.
func ProjectMembers(ctx context.Context, db bun.IDB, projectID int64) ([]ProjectMember, error) {
	var ms []ProjectMember
	if err := db.NewSelect().Model(&ms).Where("project_id = ?", projectID).OrderExpr("username ASC").Limit(MaxMembers).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: project members: %w", err)
	}
	return ms, nil
}

// MaxMembers bounds the members of one project.
const MaxMembers = 5000

// MembershipsOf returns username's role in each project it is a member of.
func MembershipsOf(ctx context.Context, db bun.IDB, username string) (map[int64]string, error) {
	var ms []ProjectMember
	if err := db.NewSelect().Model(&ms).Where("username = ?", username).Limit(MaxProjects).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: memberships: %w", err)
	}
	out := make(map[int64]string, len(ms))
	for _, m := range ms {
		out[m.ProjectID] = m.Role
	}
	return out, nil
}

// ReplaceMemberships sets username's roles to exactly roles (project id ->
// role): what a sign-on's group mapping decides on every sign-in.
func ReplaceMemberships(ctx context.Context, db bun.IDB, username, by string, roles map[int64]string) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*ProjectMember)(nil)).Where("username = ?", username).Exec(ctx); err != nil {
			return fmt.Errorf("store: replace memberships: %w", err)
		}
		now := time.Now().UTC()
		for pid, role := range roles {
			m := &ProjectMember{ProjectID: pid, Username: username, Role: role, AddedBy: by, AddedAt: now}
			if _, err := tx.NewInsert().Model(m).Exec(ctx); err != nil {
				return fmt.Errorf("store: replace memberships: %w", err)
			}
		}
		return nil
	})
}

// DeleteMembershipsOf removes every membership of username (a deleted user).
func DeleteMembershipsOf(ctx context.Context, db bun.IDB, username string) error {
	if _, err := db.NewDelete().Model((*ProjectMember)(nil)).Where("username = ?", username).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete memberships: %w", err)
	}
	return nil
}

// inProjects limits q to rows whose column is one of ids; nil ids: no limit,
// an empty non-nil list: no row.
func inProjects(q *bun.SelectQuery, column string, ids []int64) *bun.SelectQuery {
	if ids == nil {
		return q
	}
	if len(ids) == 0 {
		return q.Where("1 = 0")
	}
	return q.Where("? IN (?)", bun.Safe(column), bun.In(ids))
}

// runsInProjects limits a query on runs (columns prefixed by prefix, "r."
// or "") to the runs of tasks and delayed tasks of these projects; nil ids:
// no limit.
func runsInProjects(q *bun.SelectQuery, prefix string, ids []int64) *bun.SelectQuery {
	if ids == nil {
		return q
	}
	if len(ids) == 0 {
		return q.Where("1 = 0")
	}
	return q.Where("? IN (?)", bun.Safe(prefix+"project_id"), bun.In(ids))
}

// ProjectNames returns the names of the projects with these ids.
func ProjectNames(ctx context.Context, db bun.IDB) (map[int64]string, error) {
	ps, err := ListProjects(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(ps))
	for _, p := range ps {
		out[p.ID] = p.Name
	}
	return out, nil
}
