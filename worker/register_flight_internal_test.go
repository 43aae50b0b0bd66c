package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// A master pushes a task as soon as it has recorded the node running, which
// may be before the registration's answer reaches the worker: the push waits
// for the registration in flight and succeeds, instead of "not scheduling".
func TestStartTaskWaitsForTheRegistrationInFlight(t *testing.T) {
	t.Parallel()
	arrived, answer := make(chan struct{}), make(chan struct{})
	m := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case protocol.PathMasterRegister:
			select {
			case arrived <- struct{}{}:
			default:
			}
			<-answer // the answer is on its way
			_ = json.NewEncoder(rw).Encode(protocol.RegisterResponse{Master: "m"})
		default:
			_, _ = rw.Write([]byte("{}"))
		}
	}))
	t.Cleanup(m.Close)
	cfg := lifeConfig(t.TempDir(), m.URL)
	cfg.AutoRegister = true
	w, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	runAsync(context.Background(), w)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no registration")
	}
	spec := httpSpec("pushed", "http://127.0.0.1:1", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)})
	res := make(chan error, 1)
	go func() { res <- w.StartTask(spec) }()
	select {
	case err := <-res:
		t.Fatalf("StartTask answered %v before the registration ended", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(answer)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("StartTask after the registration: %v", err)
		}
	case <-time.After(registrationWait + 2*time.Second):
		t.Fatal("StartTask still waiting")
	}
	if w.runner.count() != 1 {
		t.Fatalf("%d tasks scheduled, want the pushed one", w.runner.count())
	}
}
