package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestNodeConfigValidate(t *testing.T) {
	t.Parallel()
	valid := protocol.NodeConfig{Name: "w1", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 10}
	cases := []struct {
		name  string
		edit  func(*protocol.NodeConfig)
		field string // "" means valid
	}{
		{"valid", func(*protocol.NodeConfig) {}, ""},
		{"name with . _ -", func(c *protocol.NodeConfig) { c.Name = "w_1.eu-west" }, ""},
		{"name one char", func(c *protocol.NodeConfig) { c.Name = "a" }, ""},
		{"name 64 chars", func(c *protocol.NodeConfig) { c.Name = strings.Repeat("a", 64) }, ""},
		{"name 65 chars", func(c *protocol.NodeConfig) { c.Name = strings.Repeat("a", 65) }, "name"},
		{"name empty", func(c *protocol.NodeConfig) { c.Name = "" }, "name"},
		{"name starts with -", func(c *protocol.NodeConfig) { c.Name = "-w" }, "name"},
		{"name starts with .", func(c *protocol.NodeConfig) { c.Name = ".w" }, "name"},
		{"name with space", func(c *protocol.NodeConfig) { c.Name = "w 1" }, "name"},
		{"name with slash", func(c *protocol.NodeConfig) { c.Name = "w/1" }, "name"},
		{"name with quote", func(c *protocol.NodeConfig) { c.Name = `w"1` }, "name"},
		{"name non-ASCII", func(c *protocol.NodeConfig) { c.Name = "wä" }, "name"},
		{"name with newline", func(c *protocol.NodeConfig) { c.Name = "w1\n" }, "name"},
		{"protocol https", func(c *protocol.NodeConfig) { c.Protocol = "https" }, ""},
		{"protocol empty", func(c *protocol.NodeConfig) { c.Protocol = "" }, "protocol"},
		{"protocol upper case", func(c *protocol.NodeConfig) { c.Protocol = "HTTP" }, "protocol"},
		{"protocol ftp", func(c *protocol.NodeConfig) { c.Protocol = "ftp" }, "protocol"},
		{"host name", func(c *protocol.NodeConfig) { c.Host = "worker-1.example.com:443" }, ""},
		{"host localhost", func(c *protocol.NodeConfig) { c.Host = "localhost:1" }, ""},
		{"host IPv6", func(c *protocol.NodeConfig) { c.Host = "[::1]:8080" }, ""},
		{"host port 65535", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:65535" }, ""},
		{"host empty", func(c *protocol.NodeConfig) { c.Host = "" }, "host"},
		{"host without port", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1" }, "host"},
		{"host port 0", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:0" }, "host"},
		{"host port 65536", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:65536" }, "host"},
		{"host port negative", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:-1" }, "host"},
		{"host port not a number", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:http" }, "host"},
		{"host port empty", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:" }, "host"},
		{"host part empty", func(c *protocol.NodeConfig) { c.Host = ":8080" }, "host"},
		{"host with scheme", func(c *protocol.NodeConfig) { c.Host = "http://10.0.0.1:80" }, "host"},
		{"host with path", func(c *protocol.NodeConfig) { c.Host = "10.0.0.1:80/x" }, "host"},
		{"host underscore", func(c *protocol.NodeConfig) { c.Host = "bad_host:80" }, "host"},
		{"host label starts with -", func(c *protocol.NodeConfig) { c.Host = "-a.example.com:80" }, "host"},
		{"host with space", func(c *protocol.NodeConfig) { c.Host = "a b:80" }, "host"},
		{"IPv6 without brackets", func(c *protocol.NodeConfig) { c.Host = "::1:80" }, "host"},
		{"priority 0", func(c *protocol.NodeConfig) { c.Priority = 0 }, ""},
		{"priority max", func(c *protocol.NodeConfig) { c.Priority = protocol.MaxPriority }, ""},
		{"priority negative", func(c *protocol.NodeConfig) { c.Priority = -1 }, "priority"},
		{"priority over max", func(c *protocol.NodeConfig) { c.Priority = protocol.MaxPriority + 1 }, "priority"},
		{"max concurrency 1", func(c *protocol.NodeConfig) { c.MaxConcurrency = 1 }, ""},
		{"max concurrency max", func(c *protocol.NodeConfig) { c.MaxConcurrency = protocol.MaxMaxConcurrency }, ""},
		{"max concurrency 0", func(c *protocol.NodeConfig) { c.MaxConcurrency = 0 }, "max_concurrency"},
		{"max concurrency negative", func(c *protocol.NodeConfig) { c.MaxConcurrency = -5 }, "max_concurrency"},
		{"max concurrency over max", func(c *protocol.NodeConfig) { c.MaxConcurrency = protocol.MaxMaxConcurrency + 1 }, "max_concurrency"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.edit(&cfg)
			err := cfg.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", cfg, err)
				}
				return
			}
			var fe protocol.FieldErrors
			if !errors.As(err, &fe) {
				t.Fatalf("Validate(%+v) = %v, want FieldErrors", cfg, err)
			}
			if !errors.Is(err, protocol.ErrInvalid) {
				t.Error("FieldErrors does not match ErrInvalid")
			}
			if len(fe) != 1 || fe[c.field] == "" {
				t.Errorf("Validate(%+v) = %v, want exactly field %q", cfg, fe, c.field)
			}
		})
	}
}

func TestFieldErrorsAllAndStable(t *testing.T) {
	t.Parallel()
	err := protocol.NodeConfig{Name: "", Protocol: "x", Host: "nope", Priority: -1, MaxConcurrency: 0}.Validate()
	var fe protocol.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 5 {
		t.Fatalf("want all 5 fields reported, got %v", err)
	}
	want := err.Error()
	for range 20 {
		if got := err.Error(); got != want {
			t.Fatalf("FieldErrors.Error is not stable: %q vs %q", got, want)
		}
	}
	if !strings.HasPrefix(want, "host: ") || !strings.Contains(want, "; max_concurrency: ") {
		t.Errorf("FieldErrors.Error = %q, want fields sorted by name", want)
	}
}
