// The first start of a cluster: its cluster key and its first admin are
// made by the engine, under the same rules as later changes.

package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// Random first passwords: long enough to resist guessing, drawn from letters
// and digits that cannot be mistaken for one another when read from a log.
const (
	randomPasswordLen     = 16
	randomPasswordLetters = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789" // no 0/O, 1/l/I
	// FirstAdmin is the user made on a cluster's first start.
	FirstAdmin = "admin"
)

// ensureClusterKey returns the configured cluster key, or the stored one,
// made and stored on the first start of the cluster.
func ensureClusterKey(ctx context.Context, db bun.IDB, configured string, log *slog.Logger) (string, error) {
	if configured != "" {
		log.Info("using the cluster key from the configuration, not the stored one")
		return configured, nil
	}
	key, err := store.EnsureSetting(ctx, db, store.SettingClusterKey, newClusterKey)
	if err != nil {
		return "", fmt.Errorf("master: cluster key: %w", err)
	}
	return key, nil
}

// newClusterKey is 32 random bytes, hex encoded.
func newClusterKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cluster key randomness: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ensureFirstAdmin creates user admin when there is no user at all. Without a
// configured password it makes a random one and logs it once: there is never
// a fixed default. A configured password follows the users' rule
// (CheckPassword). It returns whether it created the user.
func ensureFirstAdmin(ctx context.Context, db bun.IDB, password string, log *slog.Logger) (bool, error) {
	n, err := store.CountUsers(ctx, db)
	if err != nil {
		return false, err
	}
	if n > 0 {
		if password != "" {
			log.Info("--admin-password ignored: users already exist (change passwords in the console)")
		}
		return false, nil
	}
	random := password == ""
	if random {
		if password, err = randomPassword(randomPasswordLen); err != nil {
			return false, err
		}
	} else if msg := CheckPassword(password); msg != "" {
		return false, Errorf(KindInvalid, "the first admin's password %s", msg)
	}
	hash, err := HashPassword(password)
	if err != nil {
		return false, err
	}
	err = store.CreateUser(ctx, db, &store.User{Username: FirstAdmin, PasswordHash: hash, Role: store.RoleAdmin})
	if errors.Is(err, store.ErrDuplicate) {
		// Another master created it at the same moment; its password stands.
		log.Info("user admin was created by another master")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if random {
		log.Warn("FIRST START: created user admin with a random password. It is shown only this once: log in and change it.",
			"username", FirstAdmin, "password", password)
	} else {
		log.Info("first start: created user admin with the configured password")
	}
	return true, nil
}

// randomPassword draws n characters uniformly from randomPasswordLetters.
func randomPassword(n int) (string, error) {
	const letters = randomPasswordLetters
	limit := byte(256 - 256%len(letters)) // reject bytes that would bias the draw
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("password randomness: %w", err)
		}
		for _, b := range buf {
			if b < limit && len(out) < n {
				out = append(out, letters[int(b)%len(letters)])
			}
		}
	}
	return string(out), nil
}
