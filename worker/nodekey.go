package worker

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// NodeKeyFile is the name of the node key in the worker's data dir.
const NodeKeyFile = "node.key"

// prepareDataDir creates the data dir and makes it private (0700), also when
// it already existed with a looser mode: it holds the node key and run output.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("worker: data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("worker: make data dir %s private: %w", dir, err)
	}
	return nil
}

// loadOrCreateNodeKey reads the node's Ed25519 key from dir/node.key, or
// creates it (0600) on first start. A key file that exists but cannot be read
// or parsed is an error, never silently replaced: a new key would lock the
// node out of its own name on the master.
func loadOrCreateNodeKey(dir string) (ed25519.PrivateKey, bool, error) {
	path := filepath.Join(dir, NodeKeyFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		seed, derr := hex.DecodeString(string(bytes.TrimSpace(data)))
		if derr != nil || len(seed) != ed25519.SeedSize {
			return nil, false, fmt.Errorf("worker: node key %s is corrupt (want %d hex-encoded bytes); restore it, "+
				"or delete it and have an admin press Reset identity on this node in the master's console: %w",
				path, ed25519.SeedSize, protocol.ErrInvalid)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, false, fmt.Errorf("worker: make node key %s private: %w", path, err)
		}
		return ed25519.NewKeyFromSeed(seed), false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, false, fmt.Errorf("worker: read node key: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("worker: create node key: %w", err)
	}
	// O_EXCL: two processes on one data dir must not both write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("worker: create node key: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(key.Seed()) + "\n")
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("worker: write node key: %w", werr)
	}
	return key, true, nil
}
