package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// runTokenCreate creates an API token through the engine (the console's and
// the API's rules: name, expiry, an existing enabled owner, an event) and
// prints it, once, on stdout; only its hash is stored.
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
	// The engine is built, not started: it acts on the database only.
	m := master.New(master.Config{Identity: "cli"}, st, log)
	plain, _, err := m.Accounts().CreateToken(master.WithActor(ctx, "cli"), cfg.User, master.NewToken{Name: cfg.Name, ExpiresAt: cfg.ExpiresAt})
	if err != nil {
		switch master.KindOf(err) {
		case master.KindInvalid:
			return fmt.Errorf("token: %w", err) // names the field: name or expires_at
		case master.KindNotFound, master.KindState:
			return fmt.Errorf("--user: %s", master.Message(err))
		}
		return err
	}
	log.Info("API token created; it is printed once on stdout and cannot be shown again", "name", cfg.Name, "user", cfg.User)
	if _, err := fmt.Fprintln(stdout, plain); err != nil {
		return fmt.Errorf("print token: %w", err)
	}
	return nil
}
