package worker

import (
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// dataDirHealth tracks whether the worker can write its data dir: the run
// journal and the fires file each report their last write. While one of them
// fails the worker is degraded: its health answer carries the reason and the
// master shows it on the node. Each file's change (went bad, recovered) is
// logged once, not at every failed write.
type dataDirHealth struct {
	log *slog.Logger

	mu  sync.Mutex
	bad map[string]error // file name → the error of its last write
}

func newDataDirHealth(log *slog.Logger) *dataDirHealth {
	return &dataDirHealth{log: log, bad: map[string]error{}}
}

// failed records that a write of file failed; consequence says, for the one
// log line, what the worker loses meanwhile.
func (d *dataDirHealth) failed(file string, err error, consequence string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	_, was := d.bad[file]
	d.bad[file] = err
	d.mu.Unlock()
	if !was {
		d.log.Error("data directory not writable; this worker is degraded until it is: "+consequence,
			"file", file, "reason", dataDirReason(err), "err", err)
	}
}

// ok records that a write of file succeeded.
func (d *dataDirHealth) ok(file string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	_, was := d.bad[file]
	delete(d.bad, file)
	left := len(d.bad)
	d.mu.Unlock()
	if was {
		d.log.Info("data directory writable again", "file", file, "still_failing", left)
	}
}

// failing reports whether the last write of file failed.
func (d *dataDirHealth) failing(file string) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, bad := d.bad[file]
	return bad
}

// reason is the degraded reason of the health answer: empty when every
// write works, else for example "data directory full: runs.spool: write
// /data/runs.spool: no space left on device".
func (d *dataDirHealth) reason() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.bad) == 0 {
		return ""
	}
	files := make([]string, 0, len(d.bad))
	for f := range d.bad {
		files = append(files, f)
	}
	sort.Strings(files)
	parts := make([]string, len(files))
	for i, f := range files {
		parts[i] = f + ": " + d.bad[f].Error()
	}
	// The kind comes from the first failing file: a full disk fails all alike.
	return dataDirReason(d.bad[files[0]]) + ": " + strings.Join(parts, "; ")
}

// dataDirReason words why a write in the data dir failed.
func dataDirReason(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "data directory full"
	case errors.Is(err, syscall.EROFS):
		return "data directory read-only"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "data directory not writable (permission denied)"
	}
	return "data directory not writable"
}
