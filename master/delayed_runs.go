// Runs of delayed tasks: a worker reports the run of a sending like any
// other run, naming the task "ID:N" (the delayed task and its sending). Any
// master accepts it from the node it was sent to, stores it with the task's
// id, and moves the task on in the same transaction: success, a retry with
// backoff, or failed with a notification to its keepers and the webhook.

package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// delayedRun is a run report of a delayed task's sending.
type delayedRun struct {
	run store.Run
	id  string
	seq int
}

// splitDelayedRuns takes the runs of delayed tasks' sendings out of rows.
func splitDelayedRuns(rows []store.Run) (tasks []store.Run, delayed []delayedRun) {
	tasks = rows[:0:0]
	for _, r := range rows {
		if id, seq, ok := parseDelayedRunTask(r.TaskID); ok {
			delayed = append(delayed, delayedRun{run: r, id: id, seq: seq})
			continue
		}
		tasks = append(tasks, r)
	}
	return tasks, delayed
}

// delayedOutcome is what a stored run did to its task, acted upon after the
// transaction (notifications, events, waking the loop).
type delayedOutcome struct {
	id     string
	run    store.Run
	status string // the task's new status, "" when the run changed nothing
	next   time.Time
}

// ingestDelayedRuns stores the runs of delayed tasks node reported: each
// must be of a sending to node (else it is rejected), its attempt is the
// sending's. It returns how many were new and how many known already.
func (svc *DelayedTasks) ingestDelayedRuns(ctx context.Context, node *store.Node, runs []delayedRun, reject func(string, error)) (accepted, dups int, err error) {
	if len(runs) == 0 {
		return 0, 0, nil
	}
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		ids = append(ids, r.id)
	}
	sent, err := store.DispatchesOf(ctx, svc.db, node.Name, dedupe(ids))
	if err != nil {
		return 0, 0, fmt.Errorf("master: check reported delayed tasks: %w", err)
	}
	rows := make([]store.Run, 0, len(runs))
	seqs := map[string]delayedRun{}
	for _, r := range runs {
		d, ok := sent[r.id][r.seq]
		if !ok {
			reject(r.run.ID, Errorf(KindForbidden, "run %s: node %s was not sent delayed task %s (sending %d)", r.run.ID, node.Name, r.id, r.seq))
			continue
		}
		r.run.TaskID, r.run.DelayedID, r.run.Attempt, r.run.Manual = r.id, r.id, d.Attempt, false
		rows = append(rows, r.run)
		seqs[r.run.ID] = r
	}
	if len(rows) == 0 {
		return 0, 0, nil
	}
	cfg := svc.delayedCfg()
	var fresh []store.Run
	var outcomes []delayedOutcome
	unlock := svc.delayedWriteLock()
	// A redelivery racing this one, a task moved meanwhile (ErrConflict), or
	// a deadlock: run it again on fresh reads.
	isConflict := func(err error) bool { return errors.Is(err, store.ErrConflict) }
	err = store.RetryWhen(ctx, isConflict, func(ctx context.Context) error {
		outcomes = outcomes[:0]
		return svc.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var ierr error
			if fresh, ierr = store.InsertDelayedRuns(ctx, tx, rows); ierr != nil {
				return ierr
			}
			// Successes, the bulk of runs, in two statements: a success of any
			// sending ends a pending or running task (the callback was made).
			var ok []string
			okSeqs := map[int][]string{}
			var others []store.Run
			for _, r := range fresh {
				if protocol.Result(r.Result).Succeeded() {
					ok = append(ok, r.DelayedID)
					okSeqs[seqs[r.ID].seq] = append(okSeqs[seqs[r.ID].seq], r.DelayedID)
					outcomes = append(outcomes, delayedOutcome{id: r.DelayedID, run: r, status: store.DelayedSuccess})
				} else {
					others = append(others, r)
				}
			}
			// One order for every batch, so concurrent ones queue instead of deadlocking.
			sort.Strings(ok)
			if _, err := store.SucceedDelayedMany(ctx, tx, dedupe(ok), time.Now()); err != nil {
				return err
			}
			if err := store.SetDispatchOutcomes(ctx, tx, okSeqs, protocol.ResultSuccess); err != nil {
				return err
			}
			sort.SliceStable(others, func(i, j int) bool { return others[i].DelayedID < others[j].DelayedID })
			for _, r := range others {
				o, terr := svc.applyDelayedRun(ctx, tx, cfg, r, seqs[r.ID].seq)
				if terr != nil {
					return terr
				}
				outcomes = append(outcomes, o)
			}
			return nil
		})
	})
	unlock()
	if err != nil {
		return 0, 0, fmt.Errorf("master: store delayed runs: %w", err)
	}
	for _, o := range outcomes {
		switch o.status {
		case store.DelayedFailed:
			svc.delayedFailed(ctx, o.id, &o.run)
		case store.DelayedPending:
			svc.log.Info("delayed task attempt failed; retrying", "delayed", o.id, "run", o.run.ID, "result", o.run.Result, "next", o.next)
			svc.pokeDelayed(o.next)
		case store.DelayedSuccess:
			svc.log.Debug("delayed task done", "delayed", o.id, "run", o.run.ID)
		}
	}
	return len(fresh), len(rows) - len(fresh), nil
}

// applyDelayedRun moves a delayed task on after a new run r of its sending
// seq that did not succeed (successes are applied in bulk). The run of the
// current sending decides: failed or timed out, a retry after backoff while
// attempts remain, else failed; skipped (the worker was full), the same
// attempt again shortly. A late report of an earlier sending is recorded and
// changes nothing.
func (svc *DelayedTasks) applyDelayedRun(ctx context.Context, tx bun.Tx, cfg DelayedConfig, r store.Run, seq int) (delayedOutcome, error) {
	out := delayedOutcome{id: r.DelayedID, run: r}
	d, err := store.GetDelayed(ctx, tx, r.DelayedID)
	if errors.Is(err, store.ErrNotFound) {
		return out, nil // pruned meanwhile: the run is kept all the same
	}
	if err != nil {
		return out, err
	}
	now := time.Now()
	current := d.Status == store.DelayedRunning && d.Dispatches == seq
	res := protocol.Result(r.Result)
	switch {
	case res.Succeeded() && (d.Status == store.DelayedPending || d.Status == store.DelayedRunning):
		err = store.SucceedDelayed(ctx, tx, d.ID, now)
		out.status = store.DelayedSuccess
	case !current:
		// A late report of an earlier sending that did not succeed.
	case !res.UsesAttempt(): // skipped: start notices never come here
		out.status, out.next = store.DelayedPending, now.Add(cfg.Resend)
		err = store.RetryDelayed(ctx, tx, d.ID, seq, d.Attempts, d.Attempts, out.next,
			"skipped on node "+r.Node+": "+firstLine(r.Output), nil)
	case d.Attempts+1 > d.Retries:
		err = store.FinishDelayed(ctx, tx, d.ID, seq, d.Attempts, store.DelayedFailed, runFailure(r), now)
		out.status = store.DelayedFailed
	default:
		out.status, out.next = store.DelayedPending, now.Add(delayedBackoff(cfg, d.Attempts+1))
		err = store.RetryDelayed(ctx, tx, d.ID, seq, d.Attempts, d.Attempts+1, out.next, runFailure(r), nil)
	}
	if err != nil {
		return out, err // ErrConflict: moved meanwhile, the caller runs the batch again
	}
	if err := store.SetDispatchOutcome(ctx, tx, d.ID, seq, r.Result); err != nil {
		return out, err
	}
	return out, nil
}

// delayedBackoff is the wait before the retry after failed attempt n
// (1-based): Backoff × 2^(n-1), at most BackoffMax.
func delayedBackoff(cfg DelayedConfig, n int) time.Duration {
	d := cfg.Backoff
	for i := 1; i < n && d < cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, cfg.BackoffMax)
}

// runFailure says in one line why a run failed, for the task's last error.
func runFailure(r store.Run) string {
	s := r.Result + " on node " + r.Node
	if r.HTTPStatus != 0 {
		s += fmt.Sprintf(" (HTTP %d)", r.HTTPStatus)
	}
	if line := firstLine(r.Output); line != "" {
		s += ": " + line
	}
	return s
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// delayedFailure is a delayed task that failed for good, to notify about.
type delayedFailure struct {
	id  string
	run *store.Run
	at  time.Time
}

// delayedFailed records the final failure of a delayed task in the event
// log and queues its notification (keepers by e-mail, the webhook).
func (svc *DelayedTasks) delayedFailed(ctx context.Context, id string, run *store.Run) {
	detail := "failed for good"
	if run != nil {
		detail = fmt.Sprintf("failed for good after attempt %d: %s", run.Attempt, runFailure(*run))
	}
	svc.events.record(WithActor(ctx, ActorDelayed), "delayed.fail", store.TargetDelayed, id, nil, detail)
	svc.log.Warn("delayed task failed", "delayed", id, "detail", detail)
	svc.notifyOnce.Do(func() {
		svc.notifyQ = make(chan delayedFailure, notifyQueueSize)
		for range 2 {
			svc.life.goBackground(svc.serveDelayedNotifications)
		}
	})
	select {
	case svc.notifyQ <- delayedFailure{id: id, run: run, at: time.Now()}:
	default:
		total := svc.dropped.Add(1)
		svc.log.Warn("delayed failure notification dropped: queue full", "delayed", id, "dropped_total", total)
	}
}

func (svc *DelayedTasks) serveDelayedNotifications(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-svc.notifyQ:
			svc.notifyDelayedFailure(ctx, f)
		}
	}
}

// delayedPayload is the JSON the webhook receives for a delayed task that failed.
type delayedPayload struct {
	Event   string       `json:"event"` // "delayed.failed"
	Delayed delayedBrief `json:"delayed"`
	Run     *runBrief    `json:"run"`
	Output  string       `json:"output_excerpt"`
	Link    string       `json:"link"`
	SentAt  time.Time    `json:"sent_at"`
}

type delayedBrief struct {
	ID         string    `json:"id"`
	SourceApp  string    `json:"source_app"`
	Topic      string    `json:"topic"`
	ContentKey string    `json:"content_key"`
	DueAt      time.Time `json:"due_at"`
	NotifyURL  string    `json:"notify_url"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error"`
}

// notifyDelayedFailure sends one failure's e-mail and webhook, within a minute.
func (svc *DelayedTasks) notifyDelayedFailure(ctx context.Context, f delayedFailure) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := svc.GetDelayed(ctx, f.id)
	if err != nil {
		return
	}
	s := *svc.settings.inForce()
	link := ""
	if s.PublicURL != "" {
		link = strings.TrimRight(s.PublicURL, "/") + "/delayed/" + d.ID
	}
	var results []NotifyResult
	var to []string
	for _, k := range d.Keepers {
		u, err := store.GetUser(ctx, svc.db, k)
		if err == nil && !u.Disabled && u.Email != "" {
			to = append(to, u.Email)
		}
	}
	if len(to) > 0 && s.SMTPHost != "" {
		subject := fmt.Sprintf("[ScheduleMaster] delayed task failed: %s/%s/%s", d.SourceApp, d.Topic, d.ContentKey)
		body := fmt.Sprintf("Delayed task: %s\nSource app:   %s\nTopic:        %s\nContent key:  %s\nDue:          %s\nCallback:     %s\nAttempts:     %d\nLast error:   %s\n",
			d.ID, d.SourceApp, d.Topic, d.ContentKey, d.DueAt.Format(time.RFC3339), d.NotifyURL, d.Attempts, d.LastError)
		if link != "" {
			body += "Details:      " + link + "\n"
		}
		if f.run != nil {
			body += "\nOutput of the last run (end):\n" + excerpt(f.run.Output) + "\n"
		}
		results = append(results, result("email", strings.Join(to, ", "), sendMail(ctx, s, to, subject, body)))
	}
	if s.WebhookURL != "" {
		p := delayedPayload{Event: "delayed.failed", Link: link, SentAt: time.Now().UTC(),
			Delayed: delayedBrief{ID: d.ID, SourceApp: d.SourceApp, Topic: d.Topic, ContentKey: d.ContentKey,
				DueAt: d.DueAt, NotifyURL: d.NotifyURL, Attempts: d.Attempts, LastError: d.LastError}}
		if r := f.run; r != nil {
			p.Run = &runBrief{ID: r.ID, Node: r.Node, Result: r.Result, Attempt: r.Attempt, ScheduledAt: r.ScheduledAt.UTC(),
				HTTPStatus: r.HTTPStatus, ExitCode: r.ExitCode}
			p.Output = excerpt(r.Output)
		}
		results = append(results, result("webhook", s.WebhookURL, svc.postDelayedWebhook(ctx, s.WebhookURL, p)))
	}
	for _, res := range results {
		if !res.OK {
			svc.log.Warn("delayed failure notification not delivered", "channel", res.Channel, "to", res.Target, "delayed", d.ID, "err", res.Message)
		}
	}
}

// postDelayedWebhook posts p to the webhook as the task notifications do.
func (svc *DelayedTasks) postDelayedWebhook(ctx context.Context, url string, p delayedPayload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return svc.notify.postJSON(ctx, url, body)
}
