package handlers_test

import (
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Sixty concurrent wrong guesses from one address, spread over two masters on
// one database, with the right password slipped in among them: at most
// master.LoginLimitPerUser passwords are ever checked, and once the window is
// spent the right password is refused too.
func TestLoginThrottleCannotBeRaced(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		a := newEnv(t, ns)
		b := a.otherMaster()
		checks := func() int64 { return a.m.Accounts().PasswordChecks() + b.m.Accounts().PasswordChecks() }
		before := checks()
		const guesses = 60
		statuses := make([]int, guesses+1)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range guesses + 1 {
			wg.Go(func() {
				on := []*env{a, b}[i%2]
				pw := "wrong-guess-" + strconv.Itoa(i)
				if i == guesses/2 {
					pw = "admin-password-1"
				}
				<-start
				resp, err := on.client().PostForm(on.srv.URL+"/login", url.Values{"username": {"admin"}, "password": {pw}})
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		checked := checks() - before
		wrong := checked
		if statuses[guesses/2] == http.StatusSeeOther {
			wrong-- // the right password came early and gave its attempt back
		}
		t.Logf("%d concurrent guesses over two masters: %d passwords checked, %d of them wrong", guesses+1, checked, wrong)
		if wrong > master.LoginLimitPerUser {
			t.Fatalf("%d wrong passwords checked for %d concurrent guesses, want at most %d", wrong, guesses+1, master.LoginLimitPerUser)
		}
		counts := map[int]int{}
		for _, st := range statuses {
			counts[st]++
		}
		if counts[http.StatusUnauthorized]+counts[http.StatusSeeOther] != int(checked) || counts[http.StatusTooManyRequests] != guesses+1-int(checked) {
			t.Fatalf("answers %v for %d checks: every unchecked guess must be a 429", counts, checked)
		}
		// The right password, now that the window is spent, is refused on both.
		if statuses[guesses/2] != http.StatusSeeOther {
			for name, on := range map[string]*env{"a": a, "b": b} {
				resp := on.postForm(on.client(), "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("right password on %s after the window was spent: %d, want 429 with Retry-After", name, resp.StatusCode)
				}
			}
		}
		if checks()-before != checked {
			t.Fatalf("refused logins checked a password")
		}
	})
}

// A right password gives its attempt back: a team behind one address logs in
// far more often than the per-address limit without being throttled, while
// wrong ones from that address are still counted.
func TestLoginSuccessesDoNotSpendTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	for i := range 3 * master.LoginLimitPerAddress {
		resp := e.postForm(e.client(), "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login %d from one address: %d, want 303", i, resp.StatusCode)
		}
	}
	for i := range master.LoginLimitPerUser {
		resp := e.postForm(e.client(), "/login", url.Values{"username": {"admin"}, "password": {"wrong-" + strconv.Itoa(i)}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %d, want 401", i, resp.StatusCode)
		}
	}
	resp := e.postForm(e.client(), "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right password after %d wrong: %d, want 429", master.LoginLimitPerUser, resp.StatusCode)
	}
}
