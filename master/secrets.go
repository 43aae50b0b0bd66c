package master

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// alwaysSecretHeaders are masked whether or not the admin marked them.
var alwaysSecretHeaders = [...]string{"Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key"}

// IsSecretHeader reports whether a header's value is shown masked: the
// always-secret ones and those the task lists in http.secret_headers (names
// compare case-insensitively, as HTTP does).
func IsSecretHeader(name string, marked []string) bool {
	for _, h := range alwaysSecretHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return containsFold(marked, name)
}

// IsSecretParam reports whether a param is listed in secret_params.
func IsSecretParam(name string, marked []string) bool { return slices.Contains(marked, name) }

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

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
// to stand for stays as typed.
func KeepMaskedSecrets(in *protocol.TaskDef, stored *protocol.TaskDef) {
	for k, v := range in.Params {
		if v == protocol.SecretMask {
			if old, ok := stored.Params[k]; ok {
				in.Params[k] = old
			}
		}
	}
	if in.HTTP == nil || stored.HTTP == nil {
		return
	}
	for k, v := range in.HTTP.Headers {
		if v != protocol.SecretMask {
			continue
		}
		for sk, old := range stored.HTTP.Headers {
			if strings.EqualFold(sk, k) {
				in.HTTP.Headers[k] = old
				break
			}
		}
	}
	u, err := url.Parse(in.HTTP.URL)
	if err != nil || u.User == nil {
		return
	}
	if p, has := u.User.Password(); !has || p != protocol.SecretMask {
		return
	}
	su, err := url.Parse(stored.HTTP.URL)
	if err != nil || su.User == nil || su.User.Username() != u.User.Username() {
		return
	}
	if p, has := su.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), p)
		in.HTTP.URL = u.String()
	}
}
