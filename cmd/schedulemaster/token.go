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
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		return err
	}
	if err := store.CreateToken(ctx, st.DB, &store.APIToken{Name: cfg.Name, TokenHash: hash, CreatedBy: "cli"}); err != nil {
		return err
	}
	log.Info("API token created; it is printed once on stdout and cannot be shown again", "name", cfg.Name)
	if _, err := fmt.Fprintln(stdout, plain); err != nil {
		return fmt.Errorf("print token: %w", err)
	}
	return nil
}
