package worker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"sync/atomic"
)

// runIDs makes run report ids: 16 bytes written like a UUID, 8 random per
// process and an 8-byte counter. Unique across processes like a random UUID,
// but one allocation and no read of the random source per run.
type runIDs struct {
	once   sync.Once
	prefix [8]byte
	n      atomic.Uint64
}

// next is a new run id.
func (g *runIDs) next() string {
	g.once.Do(func() { _, _ = rand.Read(g.prefix[:]) })
	var raw [16]byte
	copy(raw[:8], g.prefix[:])
	binary.BigEndian.PutUint64(raw[8:], g.n.Add(1))
	var b [36]byte
	hex.Encode(b[0:8], raw[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], raw[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], raw[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], raw[8:10])
	b[23] = '-'
	hex.Encode(b[24:], raw[10:])
	return string(b[:])
}

// newRunID is the report id of a run (or of one of its attempts).
func (r *runner) newRunID() string { return r.ids.next() }

// newRunID is a run id for a report made outside a runner.
func newRunID() string {
	var g runIDs
	return g.next()
}
