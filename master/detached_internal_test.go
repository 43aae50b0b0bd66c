package master

import (
	"context"
	"testing"
	"time"
)

// A detached write outlives the request that started it but not the master:
// the caller hanging up leaves it running, Stop's cancellation ends it.
func TestDetachedEndsWithTheMasterNotTheCaller(t *testing.T) {
	m := &Master{}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	req, hangUp := context.WithCancel(context.Background())
	d, cancel := m.detached(req, time.Hour)
	defer cancel()
	hangUp()
	if d.Err() != nil {
		t.Fatalf("the caller hanging up ended the detached write: %v", d.Err())
	}
	m.cancel()
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the master's cancellation did not end the detached write")
	}
}
