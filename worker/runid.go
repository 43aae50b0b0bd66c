package worker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"sync/atomic"
)

// runID is a run report id: 16 bytes, written like a UUID. It is kept as
// bytes until a report needs its text, so starting a run formats nothing.
type runID [16]byte

// String writes the id like a UUID (8-4-4-4-12 hex digits).
func (id runID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// runIDs makes run ids: 8 bytes random per process and an 8-byte counter.
// Unique across processes like a random UUID, without reading the random
// source per run.
type runIDs struct {
	once   sync.Once
	prefix [8]byte
	n      atomic.Uint64
}

// next is a new run id.
func (g *runIDs) next() runID {
	g.once.Do(func() { _, _ = rand.Read(g.prefix[:]) })
	var id runID
	copy(id[:8], g.prefix[:])
	binary.BigEndian.PutUint64(id[8:], g.n.Add(1))
	return id
}

// newRunID is the id of a run (or of one of its attempts).
func (r *runner) newRunID() runID { return r.ids.next() }

// newRunID is a run id for a report made outside a runner.
func newRunID() runID {
	var g runIDs
	return g.next()
}
