package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// errSQLiteInUse refuses a second master on one SQLite file.
var errSQLiteInUse = errors.New("another master is running on this SQLite database; SQLite allows one master, use MySQL/MariaDB (--db mysql://…) to run several")

// lockSQLite takes an exclusive lock on a file next to the SQLite database for
// the life of the process, so a second master on the same file is refused
// before it touches the database. The kernel drops the lock when the process
// dies, killed or not, so a restart never finds a stale lock.
func lockSQLite(dbPath string) (unlock func(), err error) {
	path := dbPath + ".lock"
	// On a first start the data dir does not exist yet: the lock comes first.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("SQLite data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("SQLite lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (lock %s is held)", errSQLiteInUse, path)
		}
		return nil, fmt.Errorf("SQLite lock file %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
