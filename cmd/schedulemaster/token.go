package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// runTokenCreate creates an API token and prints it, once, on stdout; only its
// hash is stored.
func runTokenCreate(ctx context.Context, cfg tokenConfig, stdout io.Writer, log *slog.Logger) error {
	if cfg.DSN.Dialect == store.SQLite {
		// Opening would create an empty database: a wrong --data-dir would then
		// yield a token the master never sees.
		if _, err := os.Stat(cfg.DSN.Path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s: start the master first, or pass the master's --db / --data-dir", cfg.DSN.Path)
		}
	}
	st, err := store.Open(ctx, cfg.DSN, log)
	if err != nil {
		return err
	}
	defer st.Close()
	u, err := store.GetUser(ctx, st.DB, cfg.User)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("--user: there is no user %s: a token acts as an existing user", cfg.User)
	}
	if err != nil {
		return err
	}
	if u.Disabled {
		return fmt.Errorf("--user: user %s is disabled: its tokens would be refused", cfg.User)
	}
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		return err
	}
	if err := store.CreateToken(ctx, st.DB, &store.APIToken{Name: cfg.Name, TokenHash: hash, CreatedBy: u.Username, ExpiresAt: cfg.ExpiresAt}); err != nil {
		return err
	}
	log.Info("API token created; it is printed once on stdout and cannot be shown again", "name", cfg.Name, "user", u.Username)
	if _, err := fmt.Fprintln(stdout, plain); err != nil {
		return fmt.Errorf("print token: %w", err)
	}
	return nil
}
