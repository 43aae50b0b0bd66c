package worker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// BenchmarkScheduledFire measures naming the fire a cron run belongs to, done
// once per run before the task starts (part of the trigger lag, SPEC 9).
func BenchmarkScheduledFire(b *testing.B) {
	for _, expr := range []string{"* * * * * *", "*/5 * * * * *", "0 * * * * *", "0 0 * * *"} {
		b.Run(expr, func(b *testing.B) {
			def := protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: expr}}
			plan, err := protocol.NewPlan(&def)
			if err != nil {
				b.Fatal(err)
			}
			tj := &taskJob{spec: protocol.TaskSpec{TaskDef: def}, plan: plan}
			now := time.Date(2026, 11, 22, 10, 0, 0, 1_500_000, time.UTC)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = tj.scheduledFire(now)
			}
		})
	}
}

// BenchmarkFireHTTP measures one fire of a single-executor HTTP task end to
// end, as the scheduler runs it (the body of its schedule's gocron job): the
// fire named, the run admitted and started in its goroutine, the GET to a
// loopback target on a kept-alive connection, and the run report journaled
// and queued (SPEC 9: no per-fire waste). allocs/op counts the whole
// process: with target=httptest the in-process server's allocations too;
// target=raw answers from a loop that allocates nothing per request, so its
// figure is the worker's own.
//
// tasks=100 fires a schedule shared by 100 tasks: an op is their 100 runs.
func BenchmarkFireHTTP(b *testing.B) {
	for _, c := range []struct {
		target string
		tasks  int
	}{{"httptest", 1}, {"raw", 1}, {"raw", 100}} {
		b.Run(fmt.Sprintf("target=%s/tasks=%d", c.target, c.tasks), func(b *testing.B) {
			url := rawTarget(b)
			if c.target == "httptest" {
				srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNoContent) }))
				b.Cleanup(srv.Close)
				url = srv.URL
			}
			benchmarkFire(b, url, c.tasks)
		})
	}
}

func benchmarkFire(b *testing.B, url string, tasks int) {
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter(b.TempDir(), 0, testutil.Discard(), func(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
		return protocol.RunsResponse{Accepted: len(runs)}, nil
	})
	go rep.run(ctx)
	defer func() { cancel(); <-rep.done }()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128 // as the worker's: every task keeps its connection
	defer tr.CloseIdleConnections()
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100),
		http: &http.Client{Transport: tr}, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: time.Second,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return true, nil },
	}
	var err error
	if r.sched, err = newTestScheduler(); err != nil {
		b.Fatal(err)
	}
	defer r.sched.Shutdown()
	for i := range tasks {
		id := fmt.Sprintf("t%d", i)
		spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskHTTP,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"},
			HTTP:     &protocol.HTTPSpec{URL: url + "/t/" + id}}, Executors: 1}
		if err := r.start(spec); err != nil {
			b.Fatal(err)
		}
		r.job(id).since = time.Time{} // fires named by the clock's current second count as the task's own
	}
	g := r.job("t0").group
	r.fireGroup(g) // the connection is dialled once, outside the measurement
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.fireGroup(g)
	}
}

// rawTarget is a loopback HTTP/1.1 endpoint that answers every request on a
// connection with 204 from a fixed buffer: it allocates per connection, not
// per request.
func rawTarget(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	answer := []byte("HTTP/1.1 204 No Content\r\n\r\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				var pending []byte
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					// Requests have no body: each ends with an empty line.
					pending = append(pending, buf[:n]...)
					for {
						i := bytes.Index(pending, []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						pending = pending[:copy(pending, pending[i+4:])]
						if _, err := c.Write(answer); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
