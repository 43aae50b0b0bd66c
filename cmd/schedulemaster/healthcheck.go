package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// healthcheckConfig is the configuration of `schedulemaster healthcheck`.
type healthcheckConfig struct {
	URL     string
	Timeout time.Duration
	// Listen and TLSCert are the master's: without --url they give the
	// local master's /ready.
	Listen   string
	TLSCert  string
	Insecure bool
	// target is the URL checked; skipVerify is set for the derived local
	// URL of a TLS master, whose certificate names another host than 127.0.0.1.
	target     string
	skipVerify bool
	// shown is target as messages print it: never with a password.
	shown string
}

const healthcheckSynopsis = "healthcheck [--url URL] [--timeout D] [--config FILE]"

func healthcheckOptions(c *healthcheckConfig) *options {
	o := newOptions("healthcheck", "Master")
	o.add(&option{name: "url", noEnv: true, dst: &c.URL,
		usage: "URL that must answer 200 (default: the local master's /ready, from its --listen and --tls-cert, env SM_LISTEN or config file)"})
	o.add(&option{name: "timeout", noEnv: true, def: "5s", dst: &c.Timeout, min: int64(100 * time.Millisecond), max: int64(5 * time.Minute),
		usage: "time the answer may take"})
	o.add(&option{name: "insecure", noEnv: true, def: "false", dst: &c.Insecure,
		usage: "accept any TLS certificate of --url (the derived local URL always does: its certificate names the public host)"})
	var mc masterConfig
	for _, opt := range masterOptions(&mc).list {
		switch opt.key {
		case "Listen":
			o.add(&option{name: "listen", key: "Listen", def: opt.def, dst: &c.Listen, usage: "the master's --listen, for the default URL"})
		case "TLSCert":
			o.add(&option{name: "tls-cert", key: "TLSCert", dst: &c.TLSCert, usage: "the master's --tls-cert: when set the default URL is https"})
		case "":
		default:
			o.ignoredKeys = append(o.ignoredKeys, opt.key)
		}
	}
	return o
}

func parseHealthcheckConfig(args []string, lookupEnv lookupEnvFunc) (healthcheckConfig, *options, error) {
	var c healthcheckConfig
	o := healthcheckOptions(&c)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, "--url: must be an http(s)://host[:port]/path URL")
		} else {
			c.shown = u.Redacted()
		}
		c.target, c.skipVerify = c.URL, c.Insecure
	} else if target, msg := localReadyURL(c.Listen, c.TLSCert != ""); msg != "" {
		problems = append(problems, o.where("listen")+": "+msg)
	} else {
		c.target, c.skipVerify, c.shown = target, true, target
	}
	if len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// localReadyURL is the /ready URL of a master listening on listen, reached
// from the same host: an unspecified host (":30000", "0.0.0.0:30000") is
// 127.0.0.1, and "[::]:30000" is [::1].
func localReadyURL(listen string, tls bool) (string, string) {
	if msg := validListen(listen); msg != "" {
		return "", msg
	}
	host, port, _ := net.SplitHostPort(listen)
	if port == "0" {
		return "", fmt.Sprintf("%q picks a free port, so the master's URL cannot be derived: pass --url", listen)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || host == "0.0.0.0":
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/ready", ""
}

// healthBodyLimit bounds what is read of an answer: enough for any reason.
const healthBodyLimit = 64 << 10

// runHealthcheck asks the URL once. It returns nil on 200 and otherwise a
// sentence fit for a container's health log: what did not answer, or what
// the master said.
func runHealthcheck(ctx context.Context, cfg healthcheckConfig, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if cfg.skipVerify {
		// The probe asks whether this process answers, not who it is.
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	client := &http.Client{Transport: tr,
		// A redirect (to /login, say) is not health.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.target, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.shown, err)
	}
	req.Header.Set("User-Agent", "schedulemaster-healthcheck")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s", cfg.shown, dialReason(ctx, err, cfg.Timeout))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, healthBodyLimit))
	if resp.StatusCode == http.StatusOK {
		fmt.Fprintf(stdout, "ok: %s answered 200\n", cfg.shown)
		return nil
	}
	var answer struct {
		Error string `json:"error"`
	}
	reason := ""
	if json.Unmarshal(body, &answer) == nil && answer.Error != "" {
		reason = answer.Error
	} else {
		reason = excerpt(string(body), 200)
	}
	what := "answered"
	if resp.StatusCode == http.StatusServiceUnavailable {
		what = "is not ready:"
	}
	msg := fmt.Sprintf("%s %s %d %s", cfg.shown, what, resp.StatusCode, http.StatusText(resp.StatusCode))
	if reason != "" {
		msg += ": " + reason
	}
	return errors.New(msg)
}

// dialReason says in words why a request got no answer.
func dialReason(ctx context.Context, err error, timeout time.Duration) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens there (is the master running?)"
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "cannot resolve " + dns.Name
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// excerpt is s on one line, cut to n runes, control characters dropped.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}
