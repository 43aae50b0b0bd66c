package master

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Failure notifications wait in a bounded queue served by a small pool, so a
// burst of failures or a hung webhook cannot pile up goroutines.
const (
	notifyQueueSize = 1000
	notifyWorkers   = 4
)

// Each destination (the SMTP server, a webhook URL) has a queue of its own
// served by one goroutine, so one project's hung webhook delays only its
// own notices: at most maxDestinations at once, destQueueSize each, and a
// destination's goroutine ends after destIdle without work.
const (
	maxDestinations = 256
	destQueueSize   = 100
	destIdle        = time.Minute
	// notifyCallTimeout bounds one delivery (one webhook call, one mail).
	notifyCallTimeout = 10 * time.Second
)

// notifier tells a task's keepers (by e-mail) and the webhook about failed runs.
type notifier struct {
	m    *Master
	http *http.Client
	// guarded posts to project webhooks, which may not reach inside.
	guarded *http.Client
	guard   webhookGuard
	queue   chan store.Run
	start   sync.Once
	dropped atomic.Int64
	// refused counts project webhook calls the guard refused on connect.
	refused atomic.Int64

	mu    sync.Mutex
	dests map[string]chan delivery
}

// delivery is one notice to one destination.
type delivery struct {
	dest    string // the queue: "smtp", or the webhook's URL
	channel string
	target  string
	send    func(ctx context.Context) error
}

type webhookHostKey struct{}

func newNotifier(m *Master) *notifier {
	n := &notifier{m: m, http: &http.Client{Timeout: notifyCallTimeout, CheckRedirect: protocol.NoRedirect},
		queue: make(chan store.Run, notifyQueueSize), dests: map[string]chan delivery{}}
	_, port, _ := net.SplitHostPort(m.cfg.AdvertiseHost)
	n.guard = webhookGuard{port: port, allow: func() []string {
		if m.settings == nil {
			return nil
		}
		return allowHosts(m.settings.inForce().WebhookAllowHosts)
	}}
	dialer := &net.Dialer{Timeout: notifyCallTimeout, ControlContext: n.guard.dialControl(func(ctx context.Context) string {
		h, _ := ctx.Value(webhookHostKey{}).(string)
		return h
	})}
	n.guarded = &http.Client{Timeout: notifyCallTimeout, CheckRedirect: protocol.NoRedirect,
		// No kept connections: every call dials, so every call is checked.
		Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext, TLSHandshakeTimeout: notifyCallTimeout,
			DisableKeepAlives: true}}
	return n
}

// dispatch queues d on its destination's queue (dropped, and counted,
// when that queue is full or too many destinations are busy).
func (n *notifier) dispatch(d delivery) {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.dests[d.dest]
	if q == nil {
		if len(n.dests) >= maxDestinations {
			n.drop(d, "too many destinations busy")
			return
		}
		q = make(chan delivery, destQueueSize)
		if !n.m.life.goBackground(func(ctx context.Context) { n.drain(ctx, d.dest, q) }) {
			return // the master is stopping
		}
		n.dests[d.dest] = q
	}
	select {
	case q <- d:
	default:
		n.drop(d, "its destination's queue is full")
	}
}

func (n *notifier) drop(d delivery, why string) {
	total := n.dropped.Add(1)
	n.m.log.Warn("failure notification dropped", "channel", d.channel, "to", MaskURL(d.target), "why", why, "dropped_total", total)
}

// drain delivers a destination's notices one at a time, each within
// notifyCallTimeout, until it has been idle for destIdle.
func (n *notifier) drain(ctx context.Context, dest string, q chan delivery) {
	idle := time.NewTimer(destIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-q:
			cctx, cancel := context.WithTimeout(ctx, notifyCallTimeout)
			if err := d.send(cctx); err != nil {
				if errors.Is(err, errWebhookRefused) {
					n.refused.Add(1)
				}
				n.m.log.Warn("failure notification not delivered", "channel", d.channel, "to", MaskURL(d.target), "err", err)
			}
			cancel()
			idle.Reset(destIdle)
		case <-idle.C:
			n.mu.Lock()
			if len(q) == 0 {
				delete(n.dests, dest)
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
			idle.Reset(destIdle)
		}
	}
}

// NotificationsDropped counts failure notifications dropped because their
// queue was full.
func (m *Master) NotificationsDropped() int64 { return m.notify.dropped.Load() }

// NotificationsRefused counts project webhook calls refused on connect
// because the address is one a project's webhook may not reach.
func (m *Master) NotificationsRefused() int64 { return m.notify.refused.Load() }

// NotifyResult is the outcome of one notification channel.
type NotifyResult struct {
	Channel string // "email" or "webhook"
	Target  string
	OK      bool
	Message string
}

// webhookPayload is the JSON a webhook receives.
type webhookPayload struct {
	Event   string    `json:"event"` // "run.failed" or "test"
	Task    taskBrief `json:"task"`
	Run     runBrief  `json:"run"`
	Output  string    `json:"output_excerpt"`
	Link    string    `json:"link"`
	SentAt  time.Time `json:"sent_at"`
	Message string    `json:"message,omitempty"`
}

type taskBrief struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Project is the name of the task's project.
	Project string `json:"project,omitempty"`
}

type runBrief struct {
	ID          string    `json:"id"`
	Node        string    `json:"node"`
	Result      string    `json:"result"`
	Attempt     int       `json:"attempt"`
	ScheduledAt time.Time `json:"scheduled_at"`
	HTTPStatus  int       `json:"http_status"`
	ExitCode    *int      `json:"exit_code"`
}

const excerptBytes = 2048

func excerpt(s string) string {
	if len(s) <= excerptBytes {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-excerptBytes:], "")
}

// runFailed notifies about a failed or timed-out run, once its last attempt
// has failed. It runs in the background and never fails the ingestion.
func (n *notifier) runFailed(r store.Run) {
	if !protocol.Result(r.Result).Notifies() {
		return
	}
	// The pool starts with the first failure: a master that never sees one
	// runs no notification goroutines.
	n.start.Do(func() {
		for range notifyWorkers {
			n.m.life.goBackground(n.serve)
		}
	})
	select {
	case n.queue <- r:
	default:
		total := n.dropped.Add(1)
		n.m.log.Warn("failure notification dropped: queue full", "task", r.TaskID, "run", r.ID, "queue", notifyQueueSize, "dropped_total", total)
	}
}

// serve delivers queued notifications until the master stops.
func (n *notifier) serve(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-n.queue:
			n.deliver(ctx, r)
		}
	}
}

// deliver sends the notifications of one failed run, within a minute.
func (n *notifier) deliver(ctx context.Context, r store.Run) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t, err := n.m.Tasks().Get(ctx, r.TaskID)
	if err != nil || r.Attempt <= t.Retries {
		return // more attempts come, or the task is gone
	}
	for _, d := range n.deliveries(ctx, t, r) {
		n.dispatch(d)
	}
}

// deliveries are the notices of one failed run, one per destination.
func (n *notifier) deliveries(ctx context.Context, t *Task, r store.Run) []delivery {
	s := *n.m.settings.inForce()
	link := runLink(s, r.ID)
	var out []delivery
	// Each keeper reads the mail in the language they chose on their
	// account page (English when they chose none): one mail per language.
	to := map[string][]string{}
	for _, k := range t.Keepers {
		u, err := store.GetUser(ctx, n.m.st.DB, k)
		if err == nil && !u.Disabled && u.Email != "" {
			lang := locale.New(u.Locale, nil).Lang()
			to[lang] = append(to[lang], u.Email)
		}
	}
	for _, lang := range locale.Languages() {
		if len(to[lang]) == 0 || s.SMTPHost == "" {
			continue
		}
		subject, body := failureMail(locale.New(lang, nil), t, r, link)
		rcpt := to[lang]
		out = append(out, delivery{dest: "smtp", channel: "email", target: strings.Join(rcpt, ", "),
			send: func(ctx context.Context) error { return sendMail(ctx, s, rcpt, subject, body) }})
	}
	p := webhookPayload{Event: "run.failed", Task: taskBrief{ID: t.ID, Title: t.Title, Project: t.Project},
		Run:    runBrief{ID: r.ID, Node: r.Node, Result: r.Result, Attempt: r.Attempt, ScheduledAt: r.ScheduledAt.UTC(), HTTPStatus: r.HTTPStatus, ExitCode: r.ExitCode},
		Output: excerpt(r.Output), Link: link, SentAt: time.Now().UTC()}
	body, err := json.Marshal(p)
	if err != nil {
		return out
	}
	if s.WebhookURL != "" {
		u := s.WebhookURL
		out = append(out, delivery{dest: "webhook " + u, channel: "webhook", target: u,
			send: func(ctx context.Context) error { return n.postJSON(ctx, u, body) }})
	}
	// The project's own webhook: its team hears of its failures, through
	// the guarded client (a project owner's URL may not reach inside).
	if proj, err := store.GetProjectByID(ctx, n.m.st.DB, t.ProjectID); err == nil && proj.WebhookURL != "" && proj.WebhookURL != s.WebhookURL {
		u := proj.WebhookURL
		out = append(out, delivery{dest: "project webhook " + u, channel: "project webhook", target: u,
			send: func(ctx context.Context) error { return n.postProjectJSON(ctx, u, body) }})
	}
	return out
}

// failureMail is the subject and text of a failed run's mail in l's language.
func failureMail(l *locale.Localizer, t *Task, r store.Run, link string) (subject, body string) {
	res := r.Result
	if id, ok := mailResultIDs[res]; ok {
		res = l.T(id)
	}
	subject = l.T("MailSubject", "Result", res, "Title", t.Title, "Node", r.Node)
	body = l.T("MailBody", "Title", t.Title, "ID", t.ID, "Node", r.Node, "Result", res, "Attempt", r.Attempt,
		"Scheduled", r.ScheduledAt.UTC().Format(time.RFC3339), "Started", r.StartedAt.UTC().Format(time.RFC3339), "MS", r.DurationMS) + "\n"
	if r.HTTPStatus != 0 {
		body += l.T("MailHTTP", "Status", r.HTTPStatus) + "\n"
	}
	if r.ExitCode != nil {
		body += l.T("MailExitCode", "Code", *r.ExitCode) + "\n"
	}
	if link != "" {
		body += l.T("MailRun", "Link", link) + "\n"
	}
	body += "\n" + l.T("MailOutput") + "\n" + excerpt(r.Output) + "\n"
	return subject, body
}

// mailResultIDs name a run's result in a mail.
var mailResultIDs = map[string]string{"failed": "ResultFailed", "timeout": "ResultTimeout", "killed": "ResultKilled",
	"lost": "ResultLost", "skipped": "ResultSkipped", "success": "ResultSuccess"}

func result(channel, target string, err error) NotifyResult {
	target = MaskURL(target) // a webhook URL may hold a password
	if err != nil {
		return NotifyResult{Channel: channel, Target: target, Message: err.Error()}
	}
	return NotifyResult{Channel: channel, Target: target, OK: true, Message: "sent"}
}

func runLink(s Settings, runID string) string {
	if s.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(s.PublicURL, "/") + "/runs/" + runID
}

// TestNotifications sends a test e-mail to email (when SMTP is set up and email
// is not empty) and a test webhook (when set up), reporting each outcome.
func (m *Master) TestNotifications(ctx context.Context, email string) []NotifyResult {
	if err := requireClusterAdmin(ctx); err != nil {
		return []NotifyResult{{Channel: "all", Message: Message(err)}}
	}
	s := *m.settings.inForce()
	var out []NotifyResult
	switch {
	case s.SMTPHost == "":
		out = append(out, NotifyResult{Channel: "email", Message: "SMTP is not set up: no SMTP host"})
	case email == "":
		out = append(out, NotifyResult{Channel: "email", Message: "your account has no e-mail address to send the test to"})
	default:
		err := sendMail(ctx, s, []string{email}, "[ScheduleMaster] test notification",
			"This is a test of ScheduleMaster's failure notifications, sent by "+ActorFrom(ctx)+".\n")
		out = append(out, result("email", email, err))
	}
	if s.WebhookURL == "" {
		out = append(out, NotifyResult{Channel: "webhook", Message: "no webhook URL is set"})
	} else {
		p := webhookPayload{Event: "test", SentAt: time.Now().UTC(), Message: "test notification from ScheduleMaster, sent by " + ActorFrom(ctx)}
		out = append(out, result("webhook", s.WebhookURL, m.notify.postWebhook(ctx, s.WebhookURL, p)))
	}
	return out
}

func (n *notifier) postWebhook(ctx context.Context, url string, p webhookPayload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return n.postJSON(ctx, url, body)
}

// postJSON posts body to the cluster's webhook URL (a cluster admin's).
// Its messages show the URL with its password masked; a redirect is not
// followed (the notifier's clients follow none) and says so.
func (n *notifier) postJSON(ctx context.Context, url string, body []byte) error {
	return n.post(ctx, n.http, url, body)
}

// postProjectJSON posts body to a project's webhook URL, which is checked
// again at every connection, after DNS resolution (webhookGuard).
func (n *notifier) postProjectJSON(ctx context.Context, raw string, body []byte) error {
	if u, err := url.Parse(raw); err == nil {
		ctx = context.WithValue(ctx, webhookHostKey{}, u.Hostname())
	}
	return n.post(ctx, n.guarded, raw, body)
}

func (n *notifier) post(ctx context.Context, client *http.Client, target string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ScheduleMaster-Go")
	shown := MaskURL(target)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s unreachable: %w", shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 3 {
		return fmt.Errorf("webhook %s answered %d, a redirect, which is not followed: set the webhook URL to the final address", shown, resp.StatusCode)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook %s answered %d", shown, resp.StatusCode)
	}
	return nil
}

// sendMail delivers one plain-text message over SMTP with the configured TLS
// mode (none, starttls, tls) and optional PLAIN authentication.
func sendMail(ctx context.Context, s Settings, to []string, subject, body string) error {
	addr := net.JoinHostPort(s.SMTPHost, strconv.Itoa(s.SMTPPort))
	d := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	var err error
	if s.SMTPTLS == "tls" {
		conn, err = (&tls.Dialer{NetDialer: d, Config: &tls.Config{ServerName: s.SMTPHost}}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	// A hung SMTP server must not hold up Stop: cancelling ctx closes the conn.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, s.SMTPHost)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	defer c.Close()
	if s.SMTPTLS == "starttls" {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("smtp %s does not offer STARTTLS (set TLS to none or tls)", addr)
		}
		if err := c.StartTLS(&tls.Config{ServerName: s.SMTPHost}); err != nil {
			return fmt.Errorf("smtp %s: STARTTLS: %w", addr, err)
		}
	}
	if s.SMTPUsername != "" {
		if err := c.Auth(smtp.PlainAuth("", s.SMTPUsername, s.SMTPPassword, s.SMTPHost)); err != nil {
			return fmt.Errorf("smtp %s: authentication: %w", addr, err)
		}
	}
	if err := c.Mail(s.SMTPFrom); err != nil {
		return fmt.Errorf("smtp %s: sender %s refused: %w", addr, s.SMTPFrom, err)
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("smtp %s: recipient %s refused: %w", addr, rcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	clean := strings.NewReplacer("\r", " ", "\n", " ")
	msg := "From: " + s.SMTPFrom + "\r\nTo: " + strings.Join(to, ", ") + "\r\nSubject: " + clean.Replace(subject) +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")
	if _, err := io.WriteString(w, msg); err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp %s: message refused: %w", addr, err)
	}
	if err := c.Quit(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	return nil
}
