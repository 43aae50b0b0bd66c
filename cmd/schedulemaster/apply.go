package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// applyConfig is the configuration of `schedulemaster apply` and `export`.
type applyConfig struct {
	File    string // the document; "-" is stdin (apply) or stdout (export)
	Master  string
	DryRun  bool
	Prune   bool
	Timeout time.Duration
	Token   string // from SM_TOKEN only: a flag would show in ps
	// Project is the project the document is applied to or exported from
	// ("": default).
	Project string
	// Env names the variables apply fills into the document's ${ENV:NAME}
	// (comma-separated; --env may be repeated). No other is read.
	Env string
	// Settings makes export write the cluster's settings too (cluster
	// admins).
	Settings bool
}

const (
	applySynopsis  = "apply -f FILE --master URL [--project P] [--env NAME]... [--dry-run] [--prune] [--timeout D]   (API token in SM_TOKEN)"
	exportSynopsis = "export --master URL [--project P] [-o FILE] [--timeout D]   (API token in SM_TOKEN)"
)

func applyOptions(c *applyConfig, export bool) *options {
	name := "apply"
	if export {
		name = "export"
	}
	o := newOptions(name, "")
	if export {
		o.add(&option{name: "o", noEnv: true, def: "-", dst: &c.File, usage: "where to write the document (- for stdout)"})
		o.add(&option{name: "settings", noEnv: true, def: "false", dst: &c.Settings,
			usage: "write the cluster's settings too (a cluster admin's token; the SMTP and URL passwords as ${ENV:NAME})"})
	} else {
		o.add(&option{name: "f", noEnv: true, dst: &c.File, usage: "the document to apply: a YAML or JSON file, - for stdin (required)"})
	}
	o.add(&option{name: "master", dst: &c.Master, usage: "the master's URL http(s)://host[:port] (required)"})
	o.add(&option{name: "project", dst: &c.Project, usage: "the project whose tasks and workflows the document holds (default: default)"})
	if !export {
		o.add(&option{name: "env", noEnv: true, repeat: true, dst: &c.Env,
			usage: "a variable the document's ${ENV:NAME} may read, in secret fields only (repeat it, or NAME,NAME; never SM_*)"})
		o.add(&option{name: "dry-run", noEnv: true, def: "false", dst: &c.DryRun, usage: "print the plan and change nothing"})
		o.add(&option{name: "prune", noEnv: true, def: "false", dst: &c.Prune, usage: "delete the project's tasks the document does not hold, and its workflows when the document has a workflows section"})
	}
	o.add(&option{name: "timeout", noEnv: true, def: "5m", dst: &c.Timeout, min: int64(time.Second), max: int64(time.Hour),
		usage: "how long to wait for the master (an apply starts and stops tasks on workers)"})
	return o
}

// parseApplyConfig parses the flags of apply (or export) and SM_TOKEN.
func parseApplyConfig(args []string, lookupEnv lookupEnvFunc, export bool) (applyConfig, *options, error) {
	var c applyConfig
	o := applyOptions(&c, export)
	problems, err := o.parse(args, lookupEnv)
	if err != nil {
		return c, o, err
	}
	if c.File == "" {
		problems = append(problems, "-f: is required: the document to apply (- for stdin)")
	}
	if u, err := url.Parse(c.Master); c.Master == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, o.where("master")+": want the master's URL http(s)://host[:port]")
	}
	c.Master = strings.TrimRight(c.Master, "/")
	c.Token, _ = lookupEnv("SM_TOKEN")
	if c.Token = strings.TrimSpace(c.Token); c.Token == "" {
		problems = append(problems, "SM_TOKEN: is not set: an API token that may edit the project (schedulemaster token create, or the console's API tokens page)")
	}
	if len(problems) > 0 {
		return c, o, &configError{problems: problems}
	}
	return c, o, nil
}

// signalContext is a context cancelled by SIGINT or SIGTERM and the timeout.
func signalContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

// runApply fills the document's ${ENV:NAME} from the environment, sends it
// to the master's POST /api/v1/apply and prints the plan. Nothing is sent
// when a variable is missing.
func runApply(cfg applyConfig, stdin io.Reader, stdout, stderr io.Writer, lookupEnv lookupEnvFunc) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "schedulemaster apply: "+format+"\n", args...)
		return exitFailure
	}
	var r io.Reader = stdin
	if cfg.File != "-" {
		f, err := os.Open(cfg.File)
		if err != nil {
			return fail("%v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, master.MaxDocumentBytes+1))
	if err != nil {
		return fail("read %s: %v", cfg.File, err)
	}
	var names []string
	for n := range strings.SplitSeq(cfg.Env, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	filled, err := master.FillDocument(data, names, lookupEnv)
	if err != nil {
		return fail("%s: %s; nothing was sent", cfg.File, master.Message(err))
	}
	q := url.Values{}
	if cfg.Project != "" {
		q.Set("project", cfg.Project)
	}
	if cfg.DryRun {
		q.Set("dry_run", "true")
	}
	if cfg.Prune {
		q.Set("prune", "true")
	}
	target := cfg.Master + "/api/v1/apply"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	ctx, cancel := signalContext(cfg.Timeout)
	defer cancel()
	status, body, err := callMaster(ctx, http.MethodPost, target, cfg.Token, filled)
	if err != nil {
		return fail("%v", err)
	}
	var plan master.Plan
	if status >= 300 || json.Unmarshal(body, &plan) != nil || plan.Changes == nil {
		return fail("%s", answerError(status, body))
	}
	printPlan(stdout, cfg.Master, &plan)
	if plan.Error != "" {
		return fail("stopped at %s (HTTP %d)", plan.Error, status)
	}
	return exitOK
}

// runExport writes the master's GET /api/v1/export to a file or stdout.
func runExport(cfg applyConfig, stdout, stderr io.Writer) int {
	ctx, cancel := signalContext(cfg.Timeout)
	defer cancel()
	target := cfg.Master + "/api/v1/export"
	q := url.Values{}
	if cfg.Project != "" {
		q.Set("project", cfg.Project)
	}
	if cfg.Settings {
		q.Set("settings", "true")
	}
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	status, body, err := callMaster(ctx, http.MethodGet, target, cfg.Token, nil)
	if err == nil && status != http.StatusOK {
		err = errors.New(answerError(status, body))
	}
	if err == nil {
		if cfg.File == "-" {
			_, err = stdout.Write(body)
		} else {
			err = os.WriteFile(cfg.File, body, 0o600) // no secrets, but the tasks' whole definitions
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "schedulemaster export: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// callMaster sends one request with the token and returns the answer, at
// most 16 MiB of it.
func callMaster(ctx context.Context, method, target, token string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, nil, fmt.Errorf("%s %s: no answer in time (--timeout); the master may still be applying: run again with --dry-run to see where it stands", method, target)
		}
		return 0, nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the answer: %w", method, target, err)
	}
	return resp.StatusCode, out, nil
}

// answerError words a refusal: the master's sentence and its fields.
func answerError(status int, body []byte) string {
	var e struct {
		Error  string               `json:"error"`
		Fields protocol.FieldErrors `json:"fields"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return fmt.Sprintf("the master answered HTTP %d: %.200s", status, body)
	}
	msg := fmt.Sprintf("HTTP %d: %s", status, e.Error)
	if len(e.Fields) > 10 { // the sentence lists the first ten; the rest are here
		msg += "\n" + e.Fields.Error()
	}
	return msg
}

// printPlan writes a plan a line a task or workflow, then the counts.
func printPlan(w io.Writer, masterURL string, p *master.Plan) {
	switch {
	case p.DryRun:
		fmt.Fprintf(w, "plan for %s (dry run: nothing changed)\n", masterURL)
	case p.Applied:
		fmt.Fprintf(w, "applied to %s\n", masterURL)
	default:
		fmt.Fprintf(w, "applied to %s until a change failed\n", masterURL)
	}
	if ps := p.Settings; ps != nil {
		line := "= unchanged settings"
		if len(ps.Fields) > 0 {
			line = "~ update    settings: " + strings.Join(ps.Fields, ", ")
		}
		if ps.Error != "" {
			line += " FAILED: " + ps.Error
		} else if !p.DryRun && !ps.Done {
			line += " (not done)"
		}
		fmt.Fprintln(w, line)
	}
	marks := map[string]string{master.PlanCreate: "+", master.PlanUpdate: "~", master.PlanUnchanged: "=", master.PlanDelete: "-"}
	for _, c := range p.Changes {
		name := "“" + c.Title + "”"
		if c.Key != "" {
			name = c.Key + " " + name
		}
		if c.Kind != "" {
			name = c.Kind + " " + name
		}
		line := fmt.Sprintf("%s %-9s %s", marks[c.Action], c.Action, name)
		if len(c.Fields) > 0 {
			line += ": " + strings.Join(c.Fields, ", ")
		}
		if c.State != "" {
			line += " [" + c.State + "]"
		}
		if c.Error != "" {
			line += " FAILED: " + c.Error
		} else if !p.DryRun && !c.Done {
			line += " (not done)"
		}
		fmt.Fprintln(w, line)
	}
	if p.Applied {
		fmt.Fprintf(w, "%d created, %d updated, %d unchanged, %d deleted\n", p.Create, p.Update, p.Unchanged, p.Delete)
	} else {
		fmt.Fprintf(w, "%d to create, %d to update, %d unchanged, %d to delete\n", p.Create, p.Update, p.Unchanged, p.Delete)
	}
}
