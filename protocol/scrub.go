package protocol

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// MinScrubLen is the shortest secret value a Scrubber masks: shorter values
// (a "1", a "yes") would mask half of every output and protect nothing.
const MinScrubLen = 4

// alwaysSecretHeaders are secret whether or not the task marks them.
var alwaysSecretHeaders = [...]string{"Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key"}

// IsSecretHeader reports whether a header's value is secret: the
// always-secret ones (Authorization, Cookie, Proxy-Authorization, X-Api-Key)
// and those listed in marked (names compare case-insensitively, as HTTP does).
func IsSecretHeader(name string, marked []string) bool {
	for _, h := range alwaysSecretHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	for _, m := range marked {
		if strings.EqualFold(m, name) {
			return true
		}
	}
	return false
}

// SecretHeaderNames lists the headers of d's HTTP request that must not
// leave its host: the secret ones and those whose value uses a secret param.
func SecretHeaderNames(d *TaskDef) []string {
	if d.HTTP == nil {
		return nil
	}
	var out []string
	for k, v := range d.HTTP.Headers {
		if IsSecretHeader(k, d.HTTP.SecretHeaders) || usesSecretParam(v, d.SecretParams) {
			out = append(out, k)
		}
	}
	return out
}

// UsesSecretParam reports whether s holds a {{placeholder}} of a secret param.
func UsesSecretParam(s string, d *TaskDef) bool { return usesSecretParam(s, d.SecretParams) }

func usesSecretParam(s string, secret []string) bool {
	if !strings.Contains(s, "{{") {
		return false
	}
	for _, p := range secret {
		if strings.Contains(s, "{{"+p+"}}") {
			return true
		}
	}
	return false
}

// Scrubber masks a task's secret values in text by value: its secret params,
// its secret header values (as sent, params expanded, and their credential
// after a scheme such as "Bearer "), and its URL's password, each also in
// its URL-escaped forms. Values shorter than MinScrubLen are not masked. A
// nil *Scrubber masks nothing.
type Scrubber struct {
	r       *strings.Replacer
	longest int // bytes of the longest value masked
}

// NewScrubber builds the scrubber of d, or nil when d has no secret value.
// extra are more secret values to mask, such as the secret of the task's
// connection.
func NewScrubber(d *TaskDef, extra ...string) *Scrubber {
	var vals []string
	add := func(v string) {
		if len(v) < MinScrubLen || v == SecretMask {
			return
		}
		vals = append(vals, v, url.QueryEscape(v), url.PathEscape(v))
	}
	for _, k := range d.SecretParams {
		add(d.Params[k])
	}
	for _, v := range extra {
		add(v)
	}
	if h := d.HTTP; h != nil {
		for k, v := range h.Headers {
			if !IsSecretHeader(k, h.SecretHeaders) {
				continue
			}
			v = ExpandParams(v, d.Params)
			add(v)
			// "Bearer abc", "Basic xyz": the credential alone is what an
			// echoing server or an error is likely to quote.
			if scheme, cred, ok := strings.Cut(v, " "); ok {
				cred = strings.TrimSpace(cred)
				add(cred)
				// Basic's credential is user:password in base64: the
				// password may be quoted decoded.
				if b, err := base64.StdEncoding.DecodeString(cred); err == nil && strings.EqualFold(scheme, "Basic") {
					if _, pw, ok := strings.Cut(string(b), ":"); ok {
						add(pw)
					}
				}
			}
		}
		// Only a URL with user info, or params that may bring it, has a
		// password: the others are not parsed (runs without a prepared
		// request build their scrubber at each attempt).
		if strings.Contains(h.URL, "@") || strings.Contains(h.URL, "{{") {
			if u, err := url.Parse(ExpandParams(h.URL, d.Params)); err == nil && u.User != nil {
				if p, ok := u.User.Password(); ok {
					add(p)
				}
			}
		}
	}
	if len(vals) == 0 {
		return nil
	}
	// Longest first: at one position the longest value wins, so a value
	// that contains another is masked whole.
	slices.SortFunc(vals, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	vals = slices.Compact(vals)
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, SecretMask)
	}
	return &Scrubber{r: strings.NewReplacer(pairs...), longest: len(vals[0])}
}

// Longest is the length of the longest value s masks (0 for a nil s): an
// output whose beginning was cut loses that many bytes less one at the cut,
// so that no value cut in two leaves its end visible.
func (s *Scrubber) Longest() int {
	if s == nil {
		return 0
	}
	return s.longest
}

// Scrub returns s with every secret value replaced by SecretMask.
func (s *Scrubber) Scrub(text string) string {
	if s == nil || text == "" {
		return text
	}
	return s.r.Replace(text)
}
