package master

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// IsSecretHeader reports whether a header's value is shown masked: the
// always-secret ones and those the task lists in http.secret_headers (names
// compare case-insensitively, as HTTP does).
func IsSecretHeader(name string, marked []string) bool {
	return protocol.IsSecretHeader(name, marked)
}

// IsSecretParam reports whether a param is listed in secret_params.
func IsSecretParam(name string, marked []string) bool { return slices.Contains(marked, name) }

// MaskURL replaces the password of a user:pass@ URL with worker.SecretMask.
// A URL that does not parse is shown as it is: stored URLs were validated.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); !has {
		return raw
	}
	// Written by hand: url.URL would percent-encode the mask's asterisks.
	user := url.User(u.User.Username()).String()
	u.User = nil
	return u.Scheme + "://" + user + ":" + protocol.SecretMask + "@" + strings.TrimPrefix(u.String(), u.Scheme+"://")
}

// MaskTaskDef returns a copy of d fit to show: secret header values, secret
// params and URL passwords are worker.SecretMask. d is not changed.
func MaskTaskDef(d protocol.TaskDef) protocol.TaskDef {
	d.Params = maskMap(d.Params, func(k string) bool { return IsSecretParam(k, d.SecretParams) })
	if d.HTTP != nil {
		h := *d.HTTP
		h.URL = MaskURL(h.URL)
		h.Headers = maskMap(h.Headers, func(k string) bool { return IsSecretHeader(k, h.SecretHeaders) })
		d.HTTP = &h
	}
	return d
}

// MaskTask returns a copy of t fit to show (see MaskTaskDef).
func MaskTask(t Task) Task {
	t.TaskDef = MaskTaskDef(t.TaskDef)
	return t
}

func maskMap(m map[string]string, secret func(string) bool) map[string]string {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		if v != "" && secret(k) {
			out[k] = protocol.SecretMask
		}
	}
	return out
}

// KeepMaskedSecrets puts the stored value back wherever an edit sent the mask
// unchanged: a secret header or param whose value is worker.SecretMask, and
// a URL whose password is the mask (same user). A mask with no stored value
// to stand for stays as typed. It returns what it kept, named for people
// (`header "X-Token"`, `param "token"`, "the URL's password").
func KeepMaskedSecrets(in *protocol.TaskDef, stored *protocol.TaskDef) (kept []string) {
	for _, k := range slices.Sorted(maps.Keys(in.Params)) {
		if in.Params[k] == protocol.SecretMask {
			if old, ok := stored.Params[k]; ok {
				in.Params[k] = old
				kept = append(kept, fmt.Sprintf("param %q", k))
			}
		}
	}
	if in.HTTP == nil || stored.HTTP == nil {
		return kept
	}
	for _, k := range slices.Sorted(maps.Keys(in.HTTP.Headers)) {
		if in.HTTP.Headers[k] != protocol.SecretMask {
			continue
		}
		for sk, old := range stored.HTTP.Headers {
			if strings.EqualFold(sk, k) {
				in.HTTP.Headers[k] = old
				kept = append(kept, fmt.Sprintf("header %q", k))
				break
			}
		}
	}
	if keepURLPassword(&in.HTTP.URL, stored.HTTP.URL) {
		kept = append(kept, "the URL's password")
	}
	return kept
}

// keepURLPassword puts the stored URL's password back into *in when *in
// carries the mask as its password and the same user; it reports whether it
// did.
func keepURLPassword(in *string, stored string) bool {
	u, err := url.Parse(*in)
	if err != nil || u.User == nil {
		return false
	}
	if p, has := u.User.Password(); !has || p != protocol.SecretMask {
		return false
	}
	su, err := url.Parse(stored)
	if err != nil || su.User == nil || su.User.Username() != u.User.Username() {
		return false
	}
	p, has := su.User.Password()
	if !has {
		return false
	}
	u.User = url.UserPassword(u.User.Username(), p)
	*in = u.String()
	return true
}

// keepMaskedURLPassword is keepURLPassword for a stored URL setting, which
// keeps its password only on the same scheme, host and port.
func keepMaskedURLPassword(in *string, stored string) error {
	typed := *in
	if !keepURLPassword(in, stored) {
		return nil
	}
	if originOf(*in) != originOf(stored) {
		*in = typed
		return errors.New("the URL points to another host: re-enter its password (left masked)")
	}
	return nil
}

// keepSecretsForSameHost is KeepMaskedSecrets for an edit or a copy of a
// stored task, refusing to keep any secret when the URL's scheme, host or
// port changed: a masked secret must then be typed again, or the old secret
// would be sent to the new host without anyone having seen where it goes.
func keepSecretsForSameHost(in *protocol.TaskDef, stored *protocol.TaskDef) error {
	kept := KeepMaskedSecrets(in, stored)
	if len(kept) == 0 || in.HTTP == nil {
		return nil
	}
	now, was := originOf(protocol.ExpandParams(in.HTTP.URL, in.Params)), "a shell command"
	if stored.HTTP != nil {
		was = originOf(protocol.ExpandParams(stored.HTTP.URL, stored.Params))
	}
	if now == was {
		return nil
	}
	msg := fmt.Sprintf("the URL now points to another scheme, host or port (%s instead of %s): re-enter %s, or the stored secret would be sent to the new host",
		now, was, strings.Join(kept, ", "))
	// The form shows each field's sentence next to it.
	byField := map[string][]string{}
	for _, k := range kept {
		field := "http.url"
		switch {
		case strings.HasPrefix(k, "param"):
			field = "params"
		case strings.HasPrefix(k, "header"):
			field = "http.headers"
		}
		byField[field] = append(byField[field], k)
	}
	fe := protocol.FieldErrors{}
	for field, names := range byField {
		fe[field] = "the URL points to another host: re-enter " + strings.Join(names, ", ") + " (left masked)"
	}
	return &Error{Kind: KindInvalid, Msg: msg, Fields: fe}
}

// originOf is a URL's scheme://host:port, the port written out (the
// scheme's default when none is), lower case; "" when it does not parse.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
