package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Setting is one stored key/value setting.
type Setting struct {
	bun.BaseModel `bun:"table:settings"`

	Name      string    `bun:"name,pk"`
	Value     string    `bun:"value"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// GetSetting returns a stored setting or ErrNotFound.
func GetSetting(ctx context.Context, db bun.IDB, name string) (string, error) {
	s := new(Setting)
	if err := db.NewSelect().Model(s).Where("name = ?", name).Scan(ctx); err != nil {
		return "", fmt.Errorf("store: setting %q: %w", name, notFound(err))
	}
	return s.Value, nil
}

// SetSetting stores a setting, replacing any previous value.
func SetSetting(ctx context.Context, db bun.IDB, name, value string) error {
	s := &Setting{Name: name, Value: value, UpdatedAt: time.Now().UTC()}
	q := db.NewInsert().Model(s)
	if db.Dialect().Name().String() == "mysql" {
		q = q.On("DUPLICATE KEY UPDATE").Set("value = VALUES(value)").Set("updated_at = VALUES(updated_at)")
	} else {
		q = q.On("CONFLICT (name) DO UPDATE").Set("value = EXCLUDED.value").Set("updated_at = EXCLUDED.updated_at")
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("store: set setting %q: %w", name, err)
	}
	return nil
}

// EnsureSetting returns the stored value of name, storing gen() first when there
// is none. Concurrent masters agree on one value: the first insert wins.
func EnsureSetting(ctx context.Context, db bun.IDB, name string, gen func() (string, error)) (string, error) {
	if v, err := GetSetting(ctx, db, name); err == nil {
		return v, nil
	}
	v, err := gen()
	if err != nil {
		return "", err
	}
	s := &Setting{Name: name, Value: v, UpdatedAt: time.Now().UTC()}
	if _, err := db.NewInsert().Model(s).Ignore().Exec(ctx); err != nil && !isDuplicate(err) {
		return "", fmt.Errorf("store: ensure setting %q: %w", name, err)
	}
	return GetSetting(ctx, db, name)
}
