package master

import (
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A master made without a password cost hashes at bcrypt's default (tests
// lower it; production never does), its unknown-user dummy hash has the same
// cost as the real ones, and a cost below bcrypt's range is raised into it.
func TestPasswordCost(t *testing.T) {
	t.Parallel()
	ns := storetest.OpenSQLite(t)
	for _, tc := range []struct{ set, want int }{{0, bcrypt.DefaultCost}, {bcrypt.MinCost, bcrypt.MinCost}, {1, bcrypt.MinCost}} {
		l := newLoginThrottle(ns.Store.DB, storetest.Discard(), &lifecycle{}, tc.set)
		h, err := l.hash("a-password-123")
		if err != nil {
			t.Fatal(err)
		}
		for name, hash := range map[string][]byte{"hash": []byte(h), "dummy": l.dummy} {
			if c, err := bcrypt.Cost(hash); err != nil || c != tc.want {
				t.Errorf("cost %d: %s cost %d (%v), want %d", tc.set, name, c, err, tc.want)
			}
		}
	}
}
