package master

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func TestRandomPassword(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 50 {
		p, err := randomPassword(16)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 16 || strings.Trim(p, randomPasswordLetters) != "" || seen[p] {
			t.Fatalf("bad or repeated password %q", p)
		}
		seen[p] = true
	}
}

func TestFirstAdminRandomPasswordLoggedOnce(t *testing.T) {
	t.Parallel()
	st := storetest.OpenSQLite(t).Store
	ctx := storetest.Ctx(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if created, err := ensureFirstAdmin(ctx, st.DB, "", log); err != nil || !created {
		t.Fatalf("created %v, err %v", created, err)
	}
	m := regexp.MustCompile(`password=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no password in the log:\n%s", logs.String())
	}
	u, err := store.GetUser(ctx, st.DB, FirstAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != store.RoleAdmin || bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(m[1])) != nil {
		t.Errorf("admin %+v does not match the logged password", u)
	}
	logs.Reset()
	if created, err := ensureFirstAdmin(ctx, st.DB, "", log); err != nil || created {
		t.Fatalf("second start: created %v, err %v", created, err)
	}
	if strings.Contains(logs.String(), "password=") {
		t.Errorf("second start logged a password:\n%s", logs.String())
	}
}

func TestFirstAdminConfiguredPassword(t *testing.T) {
	t.Parallel()
	st := storetest.OpenSQLite(t).Store
	ctx := storetest.Ctx(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// The users' password rule holds for the first admin too.
	if _, err := ensureFirstAdmin(ctx, st.DB, "short", log); KindOf(err) != KindInvalid || !strings.Contains(Message(err), "at least") {
		t.Fatalf("err = %v, want the password rule", err)
	}
	if created, err := ensureFirstAdmin(ctx, st.DB, "correct horse", log); err != nil || !created {
		t.Fatalf("created %v, err %v", created, err)
	}
	if strings.Contains(logs.String(), "correct horse") {
		t.Error("the configured password was logged")
	}
	u, err := store.GetUser(ctx, st.DB, FirstAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("correct horse")) != nil {
		t.Error("stored hash does not match the configured password")
	}
}

func TestClusterKeyMadeOnceThenStored(t *testing.T) {
	t.Parallel()
	st := storetest.OpenSQLite(t).Store
	ctx := storetest.Ctx(t)
	first, err := ensureClusterKey(ctx, st.DB, "", storetest.Discard())
	if err != nil || len(first) != 64 {
		t.Fatalf("key %q, err %v", first, err)
	}
	again, err := ensureClusterKey(ctx, st.DB, "", storetest.Discard())
	if err != nil || again != first {
		t.Fatalf("second start: key %q, err %v; want the stored %q", again, err, first)
	}
	if got, _ := ensureClusterKey(ctx, st.DB, "configured", storetest.Discard()); got != "configured" {
		t.Fatalf("configured key not used: %q", got)
	}
}
