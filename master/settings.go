package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/mail"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Settings are the stored, console-editable settings. They take effect without
// a restart; health settings pinned by the process configuration win.
type Settings struct {
	HealthInterval     time.Duration
	HealthTimeout      time.Duration
	MaxFailures        int
	DefaultHTTPTimeout time.Duration
	RunRetentionDays   int
	SMTPHost           string
	SMTPPort           int
	SMTPFrom           string
	SMTPUsername       string
	SMTPPassword       string
	SMTPTLS            string // none, starttls or tls
	WebhookURL         string
	PublicURL          string
	// ApproveNewNodes makes a machine that registers a new name wait, with no
	// task, callback or secret, until an admin approves it.
	ApproveNewNodes bool
	// PruneOfflineAfter deletes an auto-registered worker offline for
	// longer (an autoscaled fleet's vanished members); 0 keeps them.
	PruneOfflineAfter time.Duration
	// LocalAdminsOnly lets only cluster admins sign in with a local password:
	// everyone else signs in through the identity provider, and the local
	// admins are the way in when it is down (break glass).
	LocalAdminsOnly bool
	// WebhookAllowHosts lists hosts (names or IP addresses, comma
	// separated) that project webhooks may reach although they are
	// loopback, link-local, unspecified or the master itself.
	WebhookAllowHosts string
	// TaskVersionsKept is how many versions of each task are kept; older
	// ones go at the next save, except those the task's recent runs ran.
	TaskVersionsKept int
}

// DefaultSettings are the settings of a new installation, and the defaults of
// the master's health flags: the one place they are written.
func DefaultSettings() Settings {
	return Settings{HealthInterval: 10 * time.Second, HealthTimeout: 3 * time.Second, MaxFailures: 3,
		DefaultHTTPTimeout: protocol.DefaultTimeout, RunRetentionDays: 30, SMTPPort: 587, SMTPTLS: "starttls",
		PruneOfflineAfter: DefaultPruneOfflineAfter, TaskVersionsKept: DefaultTaskVersionsKept}
}

// Limits of the health settings, for the console and for the flags alike.
const (
	MinHealthInterval = time.Second
	MaxHealthInterval = time.Hour
	MinHealthTimeout  = 100 * time.Millisecond
	MaxHealthTimeout  = time.Minute
	MinMaxFailures    = 1
	MaxMaxFailures    = 100
)

// Bounds of prune_offline_after: at least an hour (a worker rebooting or a
// network partition must not lose its node), at most a year; 0 never prunes.
const (
	DefaultPruneOfflineAfter = 24 * time.Hour
	MinPruneOfflineAfter     = time.Hour
	MaxPruneOfflineAfter     = 365 * 24 * time.Hour
)

// maxRetentionDays bounds run_retention_days (ten years).
const maxRetentionDays = 3650

// Validate checks every field and returns worker.FieldErrors, or nil.
func (s *Settings) Validate() error {
	fe := protocol.FieldErrors{}
	if s.HealthInterval < MinHealthInterval || s.HealthInterval > MaxHealthInterval {
		fe["health_interval"] = fmt.Sprintf("must be from %s to %s", MinHealthInterval, MaxHealthInterval)
	}
	if s.HealthTimeout < MinHealthTimeout || s.HealthTimeout > MaxHealthTimeout {
		fe["health_timeout"] = fmt.Sprintf("must be from %s to %s", MinHealthTimeout, MaxHealthTimeout)
	} else if fe["health_interval"] == "" && s.HealthTimeout >= s.HealthInterval {
		fe["health_timeout"] = "must be shorter than the health interval"
	}
	if s.MaxFailures < MinMaxFailures || s.MaxFailures > MaxMaxFailures {
		fe["max_failures"] = fmt.Sprintf("must be from %d to %d", MinMaxFailures, MaxMaxFailures)
	}
	if s.DefaultHTTPTimeout < 100*time.Millisecond || s.DefaultHTTPTimeout > protocol.MaxTimeout {
		fe["default_http_timeout"] = fmt.Sprintf("must be from 100ms to %s", protocol.MaxTimeout)
	}
	if s.RunRetentionDays < 0 || s.RunRetentionDays > maxRetentionDays {
		fe["run_retention_days"] = fmt.Sprintf("must be from 0 (keep forever) to %d", maxRetentionDays)
	}
	if s.TaskVersionsKept < MinTaskVersionsKept || s.TaskVersionsKept > MaxTaskVersionsKept {
		fe["task_versions_kept"] = fmt.Sprintf("must be from %d to %d", MinTaskVersionsKept, MaxTaskVersionsKept)
	}
	if p := s.PruneOfflineAfter; p != 0 && (p < MinPruneOfflineAfter || p > MaxPruneOfflineAfter) {
		fe["prune_offline_after"] = fmt.Sprintf("must be 0 (never) or from %s to %s", hours(MinPruneOfflineAfter), hours(MaxPruneOfflineAfter))
	}
	if s.SMTPHost != "" {
		if msg := protocol.ValidateHost(s.SMTPHost + ":1"); msg != "" {
			fe["smtp_host"] = "is not a valid host name or IP address"
		}
		if s.SMTPPort < 1 || s.SMTPPort > 65535 {
			fe["smtp_port"] = "must be from 1 to 65535"
		}
		if a, err := mail.ParseAddress(s.SMTPFrom); err != nil || a.Address != s.SMTPFrom {
			fe["smtp_from"] = "must be a plain e-mail address, e.g. scheduler@example.com"
		}
	}
	switch s.SMTPTLS {
	case "none", "starttls", "tls":
	default:
		fe["smtp_tls"] = "must be none, starttls or tls"
	}
	if s.SMTPUsername != "" && s.SMTPPassword == "" {
		fe["smtp_password"] = "is required with a username"
	}
	if msg := checkAllowHosts(s.WebhookAllowHosts); msg != "" {
		fe["webhook_allow_hosts"] = msg
	}
	for key, raw := range map[string]string{"webhook_url": s.WebhookURL, "public_url": s.PublicURL} {
		if msg := checkWebhook(raw); msg != "" {
			fe[key] = msg
		}
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

func (s *Settings) pairs() map[string]string {
	return map[string]string{
		store.SettingHealthInterval: s.HealthInterval.String(), store.SettingHealthTimeout: s.HealthTimeout.String(),
		store.SettingMaxFailures: strconv.Itoa(s.MaxFailures), store.SettingDefaultHTTPTimeout: s.DefaultHTTPTimeout.String(),
		store.SettingRunRetentionDays: strconv.Itoa(s.RunRetentionDays), store.SettingSMTPHost: s.SMTPHost,
		store.SettingSMTPPort: strconv.Itoa(s.SMTPPort), store.SettingSMTPFrom: s.SMTPFrom,
		store.SettingSMTPUsername: s.SMTPUsername, store.SettingSMTPPassword: s.SMTPPassword,
		store.SettingSMTPTLS: s.SMTPTLS, store.SettingWebhookURL: s.WebhookURL, store.SettingPublicURL: s.PublicURL,
		store.SettingApproveNodes:      strconv.FormatBool(s.ApproveNewNodes),
		store.SettingPruneOfflineAfter: s.PruneOfflineAfter.String(),
		store.SettingLocalAdminsOnly:   strconv.FormatBool(s.LocalAdminsOnly),
		store.SettingWebhookAllowHosts: s.WebhookAllowHosts,
		store.SettingTaskVersionsKept:  strconv.Itoa(s.TaskVersionsKept),
	}
}

// settingsKeeper holds the settings in force on this master: it loads them
// at start, reloads them when another master saved new ones (poll, at every
// health tick) and stores changes, with one event each, for every master.
type settingsKeeper struct {
	db     bun.IDB
	log    *slog.Logger
	events *eventLog
	pinned Pinned
	// onInterval is told when the health interval in force changes.
	onInterval func(time.Duration)

	cur    atomic.Pointer[Settings]
	health atomic.Pointer[HealthConfig]
	// mu serialises loading and saving; ver is the stored version of the
	// settings in force.
	mu  sync.Mutex
	ver string
}

// newSettingsKeeper starts from the configured health values over the
// defaults; load puts the stored settings over them.
func newSettingsKeeper(db bun.IDB, log *slog.Logger, events *eventLog, h HealthConfig, pinned Pinned, onInterval func(time.Duration)) *settingsKeeper {
	k := &settingsKeeper{db: db, log: log, events: events, pinned: pinned, onInterval: onInterval}
	k.health.Store(&h)
	def := DefaultSettings()
	def.HealthInterval, def.HealthTimeout, def.MaxFailures = h.Interval, h.Timeout, h.MaxFailures
	k.cur.Store(&def)
	return k
}

// inForce returns the settings in force.
func (k *settingsKeeper) inForce() *Settings { return k.cur.Load() }

// read loads the stored settings over the ones in force. A stored value that
// does not parse, or a health value out of its range, keeps the value in force
// and is logged, so the console, where it is fixed, still comes up. With
// apply's pinned values this is the whole precedence: flag > env > file (the
// pinned values) > stored > default (DefaultSettings).
func (k *settingsKeeper) read(ctx context.Context) (Settings, error) {
	s := *k.cur.Load() // the configured values stand where nothing is stored
	get := func(key string) (string, bool, error) {
		v, err := store.GetSetting(ctx, k.db, key)
		if errors.Is(err, store.ErrNotFound) {
			return "", false, nil
		}
		return v, err == nil, err
	}
	// Whole seconds are how ScheduleMaster stored durations.
	dur := func(key string, dst *time.Duration, lo, hi time.Duration) error {
		v, ok, err := get(key)
		if err != nil || !ok {
			return err
		}
		d, perr := time.ParseDuration(v)
		if perr != nil {
			if n, aerr := strconv.Atoi(v); aerr == nil {
				d, perr = time.Duration(n)*time.Second, nil
			}
		}
		switch {
		case perr != nil:
			k.log.Warn("stored setting ignored", "setting", key, "value", v, "problem", "not a duration", "using", *dst)
		case d < lo || d > hi:
			k.log.Warn("stored setting ignored", "setting", key, "value", v,
				"problem", fmt.Sprintf("out of range (%s to %s)", lo, hi), "using", *dst)
		default:
			*dst = d
		}
		return nil
	}
	num := func(key string, dst *int, lo, hi int) error {
		v, ok, err := get(key)
		if err != nil || !ok {
			return err
		}
		n, perr := strconv.Atoi(v)
		switch {
		case perr != nil:
			k.log.Warn("stored setting ignored", "setting", key, "value", v, "problem", "not a whole number", "using", *dst)
		case n < lo || n > hi:
			k.log.Warn("stored setting ignored", "setting", key, "value", v,
				"problem", fmt.Sprintf("out of range (%d to %d)", lo, hi), "using", *dst)
		default:
			*dst = n
		}
		return nil
	}
	const anyDur, anyNum = time.Duration(math.MaxInt64), math.MaxInt
	str := func(key string, dst *string) error {
		v, ok, err := get(key)
		if err == nil && ok {
			*dst = v
		}
		return err
	}
	boolean := func(key string, dst *bool) error {
		v, ok, err := get(key)
		if err == nil && ok {
			if b, perr := strconv.ParseBool(v); perr == nil {
				*dst = b
			} else {
				k.log.Warn("stored setting ignored", "setting", key, "value", v, "problem", "not true or false", "using", *dst)
			}
		}
		return err
	}
	for _, err := range []error{
		dur(store.SettingHealthInterval, &s.HealthInterval, MinHealthInterval, MaxHealthInterval),
		dur(store.SettingHealthTimeout, &s.HealthTimeout, MinHealthTimeout, MaxHealthTimeout),
		num(store.SettingMaxFailures, &s.MaxFailures, MinMaxFailures, MaxMaxFailures),
		dur(store.SettingDefaultHTTPTimeout, &s.DefaultHTTPTimeout, math.MinInt64, anyDur),
		num(store.SettingRunRetentionDays, &s.RunRetentionDays, math.MinInt, anyNum), str(store.SettingSMTPHost, &s.SMTPHost),
		num(store.SettingSMTPPort, &s.SMTPPort, math.MinInt, anyNum), str(store.SettingSMTPFrom, &s.SMTPFrom),
		str(store.SettingSMTPUsername, &s.SMTPUsername), str(store.SettingSMTPPassword, &s.SMTPPassword),
		str(store.SettingSMTPTLS, &s.SMTPTLS), str(store.SettingWebhookURL, &s.WebhookURL), str(store.SettingPublicURL, &s.PublicURL),
		str(store.SettingWebhookAllowHosts, &s.WebhookAllowHosts),
		boolean(store.SettingApproveNodes, &s.ApproveNewNodes), boolean(store.SettingLocalAdminsOnly, &s.LocalAdminsOnly),
		dur(store.SettingPruneOfflineAfter, &s.PruneOfflineAfter, 0, MaxPruneOfflineAfter),
		num(store.SettingTaskVersionsKept, &s.TaskVersionsKept, MinTaskVersionsKept, MaxTaskVersionsKept),
	} {
		if err != nil {
			return s, fmt.Errorf("master: read settings: %w", err)
		}
	}
	return s, nil
}

// load reads the stored settings at start and applies them.
func (k *settingsKeeper) load(ctx context.Context) error {
	_, err := k.reload(ctx, true)
	return err
}

// version reads the stored settings version ("" before the first save).
func (k *settingsKeeper) version(ctx context.Context) (string, error) {
	v, err := store.GetSetting(ctx, k.db, store.SettingsVersion)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("master: settings version: %w", err)
	}
	return v, nil
}

// reload reads and applies the stored settings when their version
// differs from the one in force (always with force) and reports whether it
// did. The version is read first: a save that lands during the read changes
// it again, so the next poll reloads once more and nothing is missed.
func (k *settingsKeeper) reload(ctx context.Context, force bool) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, err := k.version(ctx)
	if err != nil {
		return false, err
	}
	if !force && v == k.ver {
		return false, nil
	}
	s, err := k.read(ctx)
	if err != nil {
		return false, err
	}
	k.apply(s)
	k.ver = v
	return true, nil
}

// poll puts into force the settings another master saved since this
// one last loaded them. Every master calls it at each health tick, so a
// change reaches every master within one health interval.
func (k *settingsKeeper) poll(ctx context.Context) {
	changed, err := k.reload(ctx, false)
	if err != nil {
		k.log.Error("poll settings", "err", err)
	} else if changed {
		k.log.Info("settings reloaded: they were changed on another master")
	}
}

// update validates, stores and applies new settings at once.
func (k *settingsKeeper) update(ctx context.Context, s Settings) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.saveLocked(ctx, s)
}

// change applies fn to the stored settings and saves the result, all under
// the lock that orders saves: two changes of different fields never undo
// each other.
func (k *settingsKeeper) change(ctx context.Context, fn func(*Settings)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.stored(ctx)
	if err != nil {
		return err
	}
	fn(&s)
	return k.saveLocked(ctx, s)
}

// stored reads the settings as stored: a health value pinned by the process
// configuration and never stored is its default, not the pinned value, so a
// change of another field does not store the pin.
func (k *settingsKeeper) stored(ctx context.Context) (Settings, error) {
	s, err := k.read(ctx)
	if err != nil {
		return s, err
	}
	def := DefaultSettings()
	for _, p := range []struct {
		pinned bool
		key    string
		reset  func()
	}{
		{k.pinned.HealthInterval, store.SettingHealthInterval, func() { s.HealthInterval = def.HealthInterval }},
		{k.pinned.HealthTimeout, store.SettingHealthTimeout, func() { s.HealthTimeout = def.HealthTimeout }},
		{k.pinned.MaxFailures, store.SettingMaxFailures, func() { s.MaxFailures = def.MaxFailures }},
	} {
		if !p.pinned {
			continue
		}
		switch _, err := store.GetSetting(ctx, k.db, p.key); {
		case errors.Is(err, store.ErrNotFound):
			p.reset()
		case err != nil:
			return s, fmt.Errorf("master: read settings: %w", err)
		}
	}
	return s, nil
}

// saveLocked validates, stores and applies s; the caller holds k.mu.
func (k *settingsKeeper) saveLocked(ctx context.Context, s Settings) error {
	// URLs are shown with their password masked: the mask sent back keeps it.
	cur := k.cur.Load()
	fe := protocol.FieldErrors{}
	for _, u := range []struct {
		field string
		in    *string
		was   string
	}{{"webhook_url", &s.WebhookURL, cur.WebhookURL}, {"public_url", &s.PublicURL, cur.PublicURL}} {
		if err := keepMaskedURLPassword(u.in, u.was); err != nil {
			fe[u.field] = err.Error()
		}
	}
	if len(fe) > 0 {
		return fe
	}
	if err := s.Validate(); err != nil {
		return err
	}
	before, err := k.read(ctx)
	if err != nil {
		return fmt.Errorf("master: read settings: %w", err)
	}
	// A new version in the same transaction tells the other masters to reload.
	ver := protocol.NewNonce()
	err = k.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for k, v := range s.pairs() {
			if err := store.SetSetting(ctx, tx, k, v); err != nil {
				return err
			}
		}
		return store.SetSetting(ctx, tx, store.SettingsVersion, ver)
	})
	if err != nil {
		return fmt.Errorf("master: store settings: %w", err)
	}
	k.apply(s)
	k.ver = ver
	changed := changedSettings(before.pairs(), s.pairs())
	k.log.Info("settings changed", "by", ActorFrom(ctx), "keys", changed)
	detail := "no change"
	if len(changed) > 0 {
		detail = "changed: " + strings.Join(changed, ", ")
	}
	k.events.record(ctx, "settings.update", "settings", "settings", nil, detail)
	return nil
}

// changedSettings names the keys whose values differ, sorted. Only names: a
// value may be a secret (SMTP password, webhook URL).
func changedSettings(before, after map[string]string) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// apply puts settings into force: the health checker is rescheduled when its
// interval changes.
func (k *settingsKeeper) apply(s Settings) {
	cur := *k.health.Load()
	next := cur
	if !k.pinned.HealthInterval {
		next.Interval = s.HealthInterval
	}
	if !k.pinned.HealthTimeout {
		next.Timeout = s.HealthTimeout
	}
	if !k.pinned.MaxFailures {
		next.MaxFailures = s.MaxFailures
	}
	s.HealthInterval, s.HealthTimeout, s.MaxFailures = next.Interval, next.Timeout, next.MaxFailures
	if next.Timeout >= next.Interval {
		// Possible when one of the two is pinned: sweeps then run back to back.
		k.log.Warn("health probe timeout is not shorter than the interval", "timeout", next.Timeout, "interval", next.Interval)
	}
	k.health.Store(&next)
	k.cur.Store(&s)
	if next.Interval != cur.Interval && k.onInterval != nil {
		k.onInterval(next.Interval)
	}
}

// defaultTimeout is the timeout of a task created without one.
func (k *settingsKeeper) defaultTimeout() time.Duration { return k.cur.Load().DefaultHTTPTimeout }

// poll puts into force the settings another master saved since this
// one last loaded them. Every master calls it at each health tick, so a
// change reaches every master within one health interval.
func (m *Master) PollSettings(ctx context.Context) { m.settings.poll(ctx) }

// Settings returns the settings in force (pinned health values included) and
// which health values are pinned by the process configuration.
func (m *Master) Settings() (Settings, Pinned) { return *m.settings.inForce(), m.cfg.Pinned }

// UpdateSettings validates, stores and applies new settings at once. Pinned
// health values are stored but stay overridden while this process lives.
func (m *Master) UpdateSettings(ctx context.Context, s Settings) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	return m.settings.update(ctx, s)
}

// ChangeSettings changes only what change sets, over the stored settings,
// and saves them as UpdateSettings does (validated whole, one event, every
// master follows). It is how the API's PATCH and a form that omits a field
// leave the other fields as they are, even when two changes race.
func (m *Master) ChangeSettings(ctx context.Context, change func(*Settings)) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	return m.settings.change(ctx, change)
}

// StoredSettings returns the settings as stored, what ChangeSettings starts
// from: a pinned health value shows its stored value (or the default), not
// the one in force.
func (m *Master) StoredSettings(ctx context.Context) (Settings, error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return Settings{}, err
	}
	m.settings.mu.Lock()
	defer m.settings.mu.Unlock()
	return m.settings.stored(ctx)
}

// Purge deletes runs that started before cutoff, a bounded batch at a
// time so the database is never locked for long.
func (rs *Runs) Purge(ctx context.Context, cutoff time.Time) (int, error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return 0, err
	}
	return rs.m.retention.purge(ctx, cutoff)
}
