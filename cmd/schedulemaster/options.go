package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// source says where an option's value came from; higher wins.
type source int

const (
	srcDefault source = iota
	srcFile
	srcEnv
	srcFlag
)

// option is one setting with its flag, env vars, config file key and default.
// Its kind follows from dst: *string, *int, *bool or *time.Duration.
type option struct {
	name  string // flag name, without dashes
	usage string
	def   string // default, in the same text form as a flag value
	dst   any
	// env lists the env vars read, first set one wins; nil means "SM_" + UPPER_SNAKE(name).
	env   []string
	noEnv bool
	key   string // key in the config file section; "" means none
	// min and max bound ints and durations (ns), inclusive, when min < max.
	min, max int64
	// repeat: the flag may be given more than once; the values are joined
	// with commas (a *string option).
	repeat bool
	// looseEnvBool: an env value means true unless it is exactly "false"
	// (ScheduleMaster's SMCORE_AUTOR); flags and files stay strict.
	looseEnvBool bool
	// fileObject, when set, turns a JSON object (or array) given in the
	// config file into the option's text; without it only scalars are read.
	fileObject func(raw json.RawMessage) (string, error)

	raw   rawFlag
	src   source
	where string // source label used in messages
}

// rawFlag keeps the flag text as given, so every source is parsed by one parser
// and every error names its source the same way.
type rawFlag struct {
	def, val string
	isBool   bool
	repeat   bool
}

func (r *rawFlag) String() string {
	if r == nil {
		return ""
	}
	if r.val != "" {
		return r.val
	}
	return r.def
}
func (r *rawFlag) Set(s string) error {
	if r.repeat && r.val != "" {
		s = r.val + "," + s
	}
	r.val = s
	return nil
}
func (r *rawFlag) IsBoolFlag() bool { return r.isBool }

// configError holds every problem found in a command line, env and config
// file, so the operator fixes them in one go. It maps to exit code 2.
type configError struct {
	problems  []string
	showUsage bool
}

func (e *configError) Error() string { return strings.Join(e.problems, "\n") }

// options is the option set of one subcommand.
type options struct {
	cmd     string // e.g. "master", for usage
	fs      *flag.FlagSet
	section string // config file section, e.g. "NodeSetting"
	list    []*option
	// ignoredKeys are file keys of the section that this command accepts but
	// does not use (token create reads the master's section).
	ignoredKeys []string
	configOpt   *option
	configPath  string
	// maxArgs is how many arguments may follow the flags (user
	// reset-password NAME); args holds them after parse.
	maxArgs int
	args    []string
}

func newOptions(cmd, section string) *options {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // we print errors and usage ourselves
	o := &options{cmd: cmd, fs: fs, section: section}
	if section != "" {
		o.configOpt = o.add(&option{name: "config", dst: &o.configPath,
			usage: fmt.Sprintf("JSON config file; its %q section holds settings", section)})
	}
	return o
}

// add registers opt as a flag and returns it.
func (o *options) add(opt *option) *option {
	if opt.env == nil && !opt.noEnv {
		opt.env = []string{envName(opt.name)}
	}
	opt.raw = rawFlag{def: opt.def, repeat: opt.repeat}
	if _, ok := opt.dst.(*bool); ok {
		opt.raw.isBool = true
	}
	o.fs.Var(&opt.raw, opt.name, opt.usage)
	o.list = append(o.list, opt)
	return opt
}

// envName is the SM_ env var of a flag: listen-addr -> SM_LISTEN_ADDR.
func envName(flagName string) string {
	return "SM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// usage writes the command's flags in declaration order, with their env vars,
// file keys and defaults.
func (o *options) usage(w io.Writer, synopsis string) {
	fmt.Fprintf(w, "usage: schedulemaster %s\n\nflags (precedence: flag > env > config file > default):\n", synopsis)
	for _, opt := range o.list {
		typ := ""
		switch opt.dst.(type) {
		case *string:
			typ = " string"
		case *int:
			typ = " int"
		case *time.Duration:
			typ = " duration"
		}
		fmt.Fprintf(w, "  --%s%s\n        %s", opt.name, typ, opt.usage)
		if opt.def != "" {
			fmt.Fprintf(w, " (default %s)", opt.def)
		}
		var where []string
		if len(opt.env) > 0 {
			where = append(where, "env "+strings.Join(opt.env, ", "))
		}
		if opt.key != "" {
			where = append(where, "file key "+opt.key)
		}
		if len(where) > 0 {
			fmt.Fprintf(w, "\n        %s", strings.Join(where, "; "))
		}
		fmt.Fprintln(w)
	}
}

// where names the source of an option's value, for messages written after parsing.
func (o *options) where(name string) string {
	for _, opt := range o.list {
		if opt.name == name {
			return opt.where
		}
	}
	return "--" + name
}

// explicit reports whether an option was set by flag, env or file.
func (o *options) explicit(name string) bool {
	for _, opt := range o.list {
		if opt.name == name {
			return opt.src != srcDefault
		}
	}
	return false
}

// parse resolves every option: flag if given, else env, else file, else
// default. A bad flag syntax ends parsing with a *configError (or flag.ErrHelp);
// bad values are returned as problems and the option keeps its default, so the
// caller can still validate the rest and report everything at once.
func (o *options) parse(args []string, lookupEnv func(string) (string, bool)) ([]string, error) {
	if err := o.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &configError{problems: []string{err.Error()}, showUsage: true}
	}
	var problems []string
	if rest := o.fs.Args(); len(rest) > o.maxArgs {
		problems = append(problems, fmt.Sprintf("unexpected argument %q (flags come as --name value)", rest[o.maxArgs]))
	} else {
		o.args = rest
	}
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// The config file path itself comes from the flag or env only.
	var file map[string]string
	var fileLabel string
	if o.configOpt != nil {
		if err := o.resolve(o.configOpt, set, lookupEnv, nil, ""); err != nil {
			problems = append(problems, err.Error())
		}
		if o.configPath != "" {
			var errs []string
			file, errs = o.loadFile(o.configPath)
			problems = append(problems, errs...)
			fileLabel = "file " + o.configPath + ": " + o.section + "."
		}
	}
	for _, opt := range o.list {
		if opt == o.configOpt {
			continue
		}
		if err := o.resolve(opt, set, lookupEnv, file, fileLabel); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, nil
}

// resolve picks the winning source of one option and stores its parsed value.
func (o *options) resolve(opt *option, set map[string]bool, lookupEnv func(string) (string, bool), file map[string]string, fileLabel string) error {
	raw, loose := opt.def, false
	opt.src, opt.where = srcDefault, "--"+opt.name
	switch {
	case set[opt.name]:
		raw, opt.src, opt.where = opt.raw.val, srcFlag, "flag --"+opt.name
	default:
		for _, e := range opt.env {
			// An empty env var counts as unset: compose files often pass "X=${X}".
			if v, ok := lookupEnv(e); ok && v != "" {
				raw, opt.src, opt.where, loose = v, srcEnv, "env "+e, opt.looseEnvBool
				break
			}
		}
		if opt.src == srcDefault && opt.key != "" {
			if v, ok := file[strings.ToLower(opt.key)]; ok {
				raw, opt.src, opt.where = v, srcFile, fileLabel+opt.key
			}
		}
	}
	err := assign(opt, raw, loose)
	if err != nil && opt.src != srcDefault {
		// Keep the default so later checks do not report follow-on errors.
		_ = assign(opt, opt.def, false)
	}
	return err
}

// assign parses raw into opt.dst, checking the range.
func assign(opt *option, raw string, looseBool bool) error {
	switch d := opt.dst.(type) {
	case *string:
		*d = raw
	case *bool:
		if looseBool {
			*d = raw != "false"
			return nil
		}
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean (true or false)", opt.where, raw)
		}
		*d = v
	case *int:
		v, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", opt.where, raw)
		}
		if opt.min < opt.max && (int64(v) < opt.min || int64(v) > opt.max) {
			return fmt.Errorf("%s: %d is out of range (%d to %d)", opt.where, v, opt.min, opt.max)
		}
		*d = v
	case *time.Duration:
		v, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (e.g. 500ms, 10s, 1m30s)", opt.where, raw)
		}
		if opt.min < opt.max && (int64(v) < opt.min || int64(v) > opt.max) {
			return fmt.Errorf("%s: %s is out of range (%s to %s)", opt.where, v, time.Duration(opt.min), time.Duration(opt.max))
		}
		*d = v
	default:
		panic(fmt.Sprintf("option --%s: unsupported type %T", opt.name, opt.dst))
	}
	return nil
}

// loadFile reads the command's section of a JSON config file into lower-cased
// key -> value text. Keys match case-insensitively, as in .NET configuration;
// keys no option knows are errors, so typos do not pass silently.
func (o *options) loadFile(path string) (map[string]string, []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("config file: %v", err)}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, []string{fmt.Sprintf("config file %s: not a JSON object: %v", path, err)}
	}
	var sec json.RawMessage
	found := false
	for k, v := range top {
		if strings.EqualFold(k, o.section) {
			sec, found = v, true
			break
		}
	}
	if !found {
		return nil, []string{fmt.Sprintf("config file %s: no %q section", path, o.section)}
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(sec, &entries); err != nil || entries == nil {
		return nil, []string{fmt.Sprintf("config file %s: section %q must be a JSON object", path, o.section)}
	}
	known := map[string]bool{}
	byKey := map[string]*option{}
	var knownList []string
	for _, opt := range o.list {
		if opt.key != "" {
			known[strings.ToLower(opt.key)] = true
			byKey[strings.ToLower(opt.key)] = opt
			knownList = append(knownList, opt.key)
		}
	}
	for _, k := range o.ignoredKeys {
		known[strings.ToLower(k)] = true
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys) // stable messages
	out := map[string]string{}
	var problems []string
	for _, k := range keys {
		lk := strings.ToLower(k)
		label := fmt.Sprintf("file %s: %s.%s", path, o.section, k)
		if !known[lk] {
			problems = append(problems, fmt.Sprintf("%s: unknown key (known: %s)", label, strings.Join(knownList, ", ")))
			continue
		}
		if _, dup := out[lk]; dup {
			problems = append(problems, fmt.Sprintf("%s: key given twice (keys ignore case)", label))
			continue
		}
		v, ok, err := jsonScalar(entries[k])
		if opt := byKey[lk]; err != nil && opt != nil && opt.fileObject != nil && isJSONContainer(entries[k]) {
			v, err = opt.fileObject(entries[k])
			ok = err == nil
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", label, err))
			continue
		}
		if ok {
			out[lk] = v
		}
	}
	return out, problems
}

// isJSONContainer reports whether raw is a JSON object or array.
func isJSONContainer(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// jsonScalar turns a JSON string, number or boolean into flag text; null means unset.
func jsonScalar(raw json.RawMessage) (string, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false, err
	}
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case json.Number:
		return x.String(), true, nil
	case bool:
		return strconv.FormatBool(x), true, nil
	default:
		return "", false, errors.New("must be a string, number or boolean")
	}
}
