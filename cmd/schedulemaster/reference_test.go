package main

// docs/reference/flags.md is generated from the commands' own option tables
// (masterOptions, workerOptions, …), which only package main can read. The
// test fails while the committed page differs; regenerate every reference
// page with
//
//	SM_UPDATE_REFERENCE=1 go test ./docs ./cmd/schedulemaster -run TestReference
//
// (docs/reference_test.go writes the others and checks every page carries
// the note below.)

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// regenerateReference is what a stale page tells its reader to run.
const regenerateReference = "SM_UPDATE_REFERENCE=1 go test ./docs ./cmd/schedulemaster -run TestReference"

// generatedReferenceNote opens every generated page (docs/reference_test.go
// has the same).
const generatedReferenceNote = "Generated; do not edit. Regenerate with `" + regenerateReference + "`."

// referenceCommand is one command of the flag reference.
type referenceCommand struct {
	name     string // as typed after schedulemaster
	synopsis string
	opts     *options
}

// referenceCommands are the commands with flags, in the order of usageText.
func referenceCommands() []referenceCommand {
	var (
		mc masterConfig
		wc workerConfig
		tc tokenConfig
		gc migrateConfig
		rc resetPasswordConfig
		hc healthcheckConfig
		ac applyConfig
		ec applyConfig
	)
	return []referenceCommand{
		{"master", masterSynopsis, masterOptions(&mc)},
		{"worker", workerSynopsis, workerOptions(&wc)},
		{"token create", tokenSynopsis, tokenOptions(&tc)},
		{"migrate", migrateSynopsis, migrateOptions(&gc)},
		{"user reset-password", resetPasswordSynopsis, resetPasswordOptions(&rc)},
		{"healthcheck", healthcheckSynopsis, healthcheckOptions(&hc)},
		{"apply", applySynopsis, applyOptions(&ac, false)},
		{"export", exportSynopsis, applyOptions(&ec, true)},
	}
}

// referenceCell makes text safe in a Markdown table cell.
func referenceCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// optionKind names the type of an option's value.
func optionKind(opt *option) string {
	switch opt.dst.(type) {
	case *int:
		return "int"
	case *bool:
		return "bool"
	case *time.Duration:
		return "duration"
	}
	return "string"
}

// optionBounds says the inclusive bounds of an int or duration option, "" for none.
func optionBounds(opt *option) string {
	if opt.min >= opt.max {
		return ""
	}
	if _, ok := opt.dst.(*time.Duration); ok {
		return fmt.Sprintf(" (%s to %s)", time.Duration(opt.min), time.Duration(opt.max))
	}
	return fmt.Sprintf(" (%d to %d)", opt.min, opt.max)
}

// flagsReference renders docs/reference/flags.md.
func flagsReference() string {
	var b strings.Builder
	b.WriteString("# Flag reference\n\n")
	b.WriteString(generatedReferenceNote + "\n\n")
	b.WriteString("Every flag of the `schedulemaster` commands, read from the commands' own option tables: its " +
		"environment variables (the first one set wins), its key in the section of the `--config` JSON file, " +
		"its default and what it sets. Precedence is flag > environment > file > default; `schedulemaster " +
		"<command> -h` prints the same. How they fit together: [Configuration](../configuration.md).\n")
	for _, c := range referenceCommands() {
		fmt.Fprintf(&b, "\n## %s\n\n", c.name)
		b.WriteString("```\n")
		for _, line := range strings.Split(c.synopsis, "\n") {
			line = strings.Join(strings.Fields(line), " ")
			if !strings.HasPrefix(line, "schedulemaster ") {
				line = "schedulemaster " + line
			}
			fmt.Fprintf(&b, "%s\n", line)
		}
		b.WriteString("```\n\n")
		if c.opts.section != "" {
			fmt.Fprintf(&b, "Config file section: `%s`.\n\n", c.opts.section)
		} else {
			b.WriteString("No config file.\n\n")
		}
		b.WriteString("| flag | type | environment | file key | default | what it sets |\n|---|---|---|---|---|---|\n")
		for _, opt := range c.opts.list {
			env := "—"
			if len(opt.env) > 0 {
				env = "`" + strings.Join(opt.env, "`, `") + "`"
			}
			key := "—"
			if opt.key != "" {
				key = "`" + opt.key + "`"
			}
			def := ""
			if opt.def != "" {
				def = "`" + opt.def + "`"
			}
			usage := opt.usage + optionBounds(opt)
			if opt.repeat {
				usage += "; may be repeated"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s | %s |\n", opt.name, optionKind(opt), env, key, def, referenceCell(usage))
		}
	}
	return b.String()
}

// TestReferenceFlags keeps docs/reference/flags.md what the commands' option
// tables say.
func TestReferenceFlags(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "docs", "reference", "flags.md")
	want := flagsReference()
	if os.Getenv("SM_UPDATE_REFERENCE") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote docs/reference/flags.md")
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("docs/reference/flags.md: %v; generate it with\n\t%s", err, regenerateReference)
	}
	if string(got) != want {
		t.Errorf("docs/reference/flags.md is stale (it differs from the commands' flags); regenerate it with\n\t%s", regenerateReference)
	}
}
