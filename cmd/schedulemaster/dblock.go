package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// errSQLiteInUse refuses a second master on one SQLite file.
var errSQLiteInUse = errors.New("another master is running on this SQLite database; SQLite allows one master, use MySQL/MariaDB or PostgreSQL (--db mysql://… or postgres://…) to run several")

// errWorkerDirInUse refuses a second worker on one data dir: the two would
// mix their run journals, and each start kills the shell commands the dir
// lists as left running.
var errWorkerDirInUse = errors.New("another worker is running with this data dir; give each worker its own --data-dir")

// workerLockFile is the lock file a worker holds in its data dir.
const workerLockFile = "worker.lock"

// lockSQLite takes an exclusive lock on a file next to the SQLite database for
// the life of the process, so a second master on the same file is refused
// before it touches the database.
func lockSQLite(dbPath string) (unlock func(), err error) {
	return lockFile(dbPath+".lock", "SQLite", errSQLiteInUse)
}

// lockWorkerDir takes an exclusive lock in a worker's data dir for the life
// of the process, so a second worker on the same dir is refused before it
// reads the dir.
func lockWorkerDir(dataDir string) (unlock func(), err error) {
	return lockFile(filepath.Join(dataDir, workerLockFile), "worker data dir", errWorkerDirInUse)
}

// lockFile takes an exclusive, non-blocking flock on path, creating it and its
// dir (on a first start the data dir does not exist yet: the lock comes
// first). The kernel drops the lock when the process dies, killed or not, so
// a restart never finds a stale lock.
func lockFile(path, what string, inUse error) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s lock file: %w", what, err)
	}
	if held, err := tryLockFile(f); err != nil {
		f.Close()
		if held {
			return nil, fmt.Errorf("%w (lock %s is held)", inUse, path)
		}
		return nil, fmt.Errorf("%s lock file %s: %w", what, path, err)
	}
	return func() { f.Close() }, nil
}
