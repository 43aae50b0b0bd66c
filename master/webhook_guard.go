package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// errWebhookRefused is a project webhook's connection refused by the guard.
var errWebhookRefused = errors.New("refused")

// maxAllowHosts bounds Settings.WebhookAllowHosts.
const maxAllowHosts = 50

// checkAllowHosts returns what is wrong with a list of allowed webhook
// hosts ("host, host:port, 10.0.0.1"), or "".
func checkAllowHosts(list string) string {
	hosts := allowHosts(list)
	if len(hosts) > maxAllowHosts {
		return fmt.Sprintf("lists more than %d hosts", maxAllowHosts)
	}
	for _, h := range hosts {
		name := h
		if host, _, err := net.SplitHostPort(h); err == nil {
			name = host
		}
		if name == "" || len(h) > 255 || strings.ContainsAny(h, "/@?#\\ \t\x00") {
			return fmt.Sprintf("%q is not a host name or IP address", h)
		}
	}
	return ""
}

// allowHosts splits a list of allowed hosts, lower-cased.
func allowHosts(list string) []string {
	var out []string
	for h := range strings.SplitSeq(list, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// webhookGuard says which addresses a project's webhook may reach: not
// loopback, link-local, unspecified or multicast addresses, and not the
// master's own port on this machine, unless a cluster admin allowed the
// host in the settings. It is checked when the URL is saved and again on
// every connection, after DNS resolution, so a name that later resolves
// inside (DNS rebinding) is refused too.
type webhookGuard struct {
	// port is the master's own port ("" when unknown).
	port  string
	allow func() []string
}

// allowed reports whether host (a name or address, as in the URL) or the
// address it resolved to is on the allow list.
func (g webhookGuard) allowed(host, port string, ip net.IP) bool {
	list := g.allow()
	for _, cand := range []string{strings.ToLower(host), ip.String()} {
		if cand == "" || cand == "<nil>" {
			continue
		}
		if slices.Contains(list, cand) || slices.Contains(list, net.JoinHostPort(cand, port)) {
			return true
		}
	}
	return false
}

// problem returns why ip:port is no place for a project's webhook, or "".
func (g webhookGuard) problem(ip net.IP, port string) string {
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	}
	if g.port != "" && port == g.port && isLocalAddress(ip) {
		return "this master's own address"
	}
	return ""
}

// isLocalAddress reports whether ip is an address of this machine.
func isLocalAddress(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// checkURL checks a webhook URL when it is saved: its host as written and
// every address it resolves to now (a name that does not resolve is left
// to the check at send time). It returns the sentence of a refusal, or "".
func (g webhookGuard) checkURL(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	refuse := func(why string) string {
		return fmt.Sprintf("may not reach %s (%s): a project's webhook cannot reach loopback, link-local or unspecified addresses or the master itself; a cluster admin can allow the host in the settings", host, why)
	}
	if lh := strings.ToLower(strings.TrimSuffix(host, ".")); lh == "localhost" || strings.HasSuffix(lh, ".localhost") {
		if !g.allowed(host, port, nil) {
			return refuse("a loopback name")
		}
		return ""
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return ""
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if why := g.problem(ip, port); why != "" && !g.allowed(host, port, ip) {
			return refuse(why)
		}
	}
	return ""
}

// dialControl refuses, at connect time, an address checkURL would refuse;
// host is the URL's host, for the allow list.
func (g webhookGuard) dialControl(host func(context.Context) string) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(ctx context.Context, network, address string, _ syscall.RawConn) error {
		h, port, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(h)
		if ip == nil {
			return fmt.Errorf("webhook address %q is not an IP address", address)
		}
		if why := g.problem(ip, port); why != "" && !g.allowed(host(ctx), port, ip) {
			return fmt.Errorf("%w: %s is %s, which a project's webhook may not reach (a cluster admin can allow the host in the settings)", errWebhookRefused, address, why)
		}
		return nil
	}
}
