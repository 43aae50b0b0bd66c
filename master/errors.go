package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Kind says why the engine refused something; handlers map it to an HTTP status.
type Kind int

// Kinds of refusal.
const (
	// KindInvalid is bad input; Fields may say which fields.
	KindInvalid Kind = iota + 1
	// KindNotFound is a missing node, task, run or user.
	KindNotFound
	// KindDuplicate is a name that is taken.
	KindDuplicate
	// KindState is an action the current status does not allow.
	KindState
	// KindWorker is a failed call to a worker; the node's state is unchanged.
	KindWorker
	// KindUnauthorized is a worker-to-master call that failed authentication.
	KindUnauthorized
	// KindForbidden is an authenticated caller acting as someone else or on
	// something it may not touch.
	KindForbidden
	// KindLimited is a caller over a rate limit (login attempts); RetryAfter
	// says when to try again.
	KindLimited
	// KindTooLarge is a request over a documented size bound.
	KindTooLarge
	// KindBusy is a request refused because the master is at a documented
	// bound of concurrent work; the same request later succeeds.
	KindBusy
	// KindUnavailable is a request the database did not answer in time (a
	// call past its deadline): the master works, its database does not, and
	// the same request later, or to another master, succeeds.
	KindUnavailable
	// KindTooEarly is a claim of a fire further ahead of the master's clock
	// than ClaimSkew allows; RetryAfter says when it may be claimed.
	KindTooEarly
)

// String names the kind as the sentinels' texts do.
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid input"
	case KindNotFound:
		return "not found"
	case KindDuplicate:
		return "already exists"
	case KindState:
		return "not allowed in this state"
	case KindWorker:
		return "worker call failed"
	case KindUnauthorized:
		return "unauthorized"
	case KindForbidden:
		return "forbidden"
	case KindLimited:
		return "too many attempts"
	case KindTooLarge:
		return "too large"
	case KindBusy:
		return "busy"
	case KindUnavailable:
		return "unavailable"
	case KindTooEarly:
		return "too early"
	}
	return fmt.Sprintf("kind %d", int(k))
}

// Error is the one refusal type of the engine. Msg is a sentence for people
// (the console and the API show it as it is); Err keeps the cause for the log
// only, so a Go error chain never reaches a page.
type Error struct {
	Kind   Kind
	Msg    string
	Fields protocol.FieldErrors
	Err    error
	// RetryAfter is when a KindLimited or KindTooEarly caller may try again.
	RetryAfter time.Duration
}

// Error is the text for logs: kind, sentence and cause.
func (e *Error) Error() string {
	s := "master: " + e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches any refusal of the same kind, so errors.Is(err, ErrState) holds
// for every state refusal.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// Unwrap gives the field errors and the cause to errors.As and errors.Is.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Fields != nil {
		out = append(out, e.Fields)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// ErrVersionMoved is the cause of the refusal of an edit that started from
// a version of the task older than its own (errors.Is finds it).
var ErrVersionMoved = errors.New("it was saved since the version the edit started from")

// Sentinels of the engine, one per kind; errors.Is(err, ErrX) tests the kind.
var (
	// ErrInvalid means bad input (a protocol.FieldErrors may carry the fields).
	ErrInvalid error = &Error{Kind: KindInvalid}
	// ErrNotFound means the node, task, run or user does not exist.
	ErrNotFound error = &Error{Kind: KindNotFound}
	// ErrDuplicate means the name is taken.
	ErrDuplicate error = &Error{Kind: KindDuplicate}
	// ErrState means the action is not allowed in the current status.
	ErrState error = &Error{Kind: KindState}
	// ErrWorker means a call to a worker failed; the node's state is unchanged.
	ErrWorker error = &Error{Kind: KindWorker}
	// ErrUnauthorized means a worker-to-master call failed authentication.
	ErrUnauthorized error = &Error{Kind: KindUnauthorized}
	// ErrForbidden means an authenticated caller acted as someone else or on
	// something it may not touch (a worker reporting runs of another's task).
	ErrForbidden error = &Error{Kind: KindForbidden}
)

// ErrIdentityInUse refuses the start of a master whose identity's node row is
// heartbeated by another live master process.
// ErrDirectoryRefused is a directory's answer to an unknown user or a wrong
// password (one answer for both, as for local users).
var ErrDirectoryRefused = errors.New("master: the directory refused the user name or password")

// ErrDirectoryUnavailable is a directory (LDAP) that cannot be reached or
// did not answer in time: not a wrong password.
var ErrDirectoryUnavailable = errors.New("master: the directory cannot be reached")

var ErrIdentityInUse = errors.New("master: identity held by a live master")

// Errorf returns a refusal of kind k whose sentence is the formatted text.
func Errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// wrapf is Errorf keeping cause for the log; the sentence must not repeat it.
func wrapf(k Kind, cause error, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// KindOf returns the kind of a refusal, or 0 for an unexpected error. Field
// errors and the protocol's invalid input count as KindInvalid; a context
// deadline in the chain (a database call past the request's deadline: the
// database hangs) counts as KindUnavailable.
func KindOf(err error) Kind {
	var e *Error
	var fe protocol.FieldErrors
	switch {
	case errors.As(err, &e):
		return e.Kind
	case errors.As(err, &fe), errors.Is(err, protocol.ErrInvalid):
		return KindInvalid
	case errors.Is(err, context.DeadlineExceeded), store.IsUnreachable(err):
		return KindUnavailable
	}
	return 0
}

// UnavailableMsg is the sentence of a request the database did not answer in
// time.
const UnavailableMsg = "the database did not answer in time or refused the connection; retrying"

// UnavailableRetryAfter is when a caller refused for KindUnavailable may try
// again: a hang is seldom over sooner.
const UnavailableRetryAfter = 5 * time.Second

// Message is the sentence to show people for err: a refusal's Msg (its kind
// for a bare sentinel), UnavailableMsg for a call past its deadline, or the
// error's text otherwise; never a refusal's cause.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Msg == "" {
			return e.Kind.String()
		}
		return e.Msg
	}
	if KindOf(err) == KindUnavailable {
		return UnavailableMsg
	}
	return err.Error()
}

// Merge adds the field errors err carries to fe, keeping the fields fe
// already has, and reports whether err carried any.
func Merge(fe protocol.FieldErrors, err error) bool {
	var more protocol.FieldErrors
	if !errors.As(err, &more) {
		return false
	}
	for k, v := range more {
		if _, ok := fe[k]; !ok {
			fe[k] = v
		}
	}
	return true
}

// netReason says in a few words why a network call failed (the full chain
// goes to the log).
func netReason(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "unknown host"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.Is(err, context.Canceled):
		return "request canceled"
	}
	return "network error"
}

// RetryAfter is how long a refused caller should wait before trying again,
// 0 when err says nothing about it.
func RetryAfter(err error) time.Duration {
	var e *Error
	switch {
	case errors.As(err, &e) && e.RetryAfter > 0:
		return e.RetryAfter
	case KindOf(err) == KindUnavailable:
		return UnavailableRetryAfter
	}
	return 0
}

// errStoppedUnsent is the outcome of a delayed task's sending whose batch
// never left: the master stopped first, and the task goes back to pending.
var errStoppedUnsent = errors.New("master: stopped before the sending left")
