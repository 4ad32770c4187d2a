// Package flagenv defines command-line flags whose defaults come from
// OUTBOX_* environment variables, so every knob has both, and holds the
// CLI's conventions: one-line usage errors with a suggestion, help on
// stdout that lists arguments, required flags and each flag's variable,
// durations in days, secrets never printed.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/redact"
	"github.com/outbox-relay/outbox-relay/internal/termsafe"
)

// Set is a flag.FlagSet that also reads environment variables.
type Set struct {
	*flag.FlagSet
	cmd    string // "outbox-relay purge", for help and errors
	getenv func(string) string
	// prefix names a flag's variable: OUTBOX_ for run, OUTBOX_PURGE_ for
	// purge. Shared flags (--database-url) are OUTBOX_<FLAG> everywhere.
	prefix   string
	shared   map[string]bool
	legacy   map[string]bool // also read from OUTBOX_<FLAG>, with a warning
	required []string
	unless   map[string]string // a required flag that another one stands in for
	args     string            // the positional arguments' synopsis, "" for none
	argsHelp string
	about    string
	fromEnv  map[string]string // flag name -> the variable that set it
	withEnv  map[string]bool   // flags that read a variable (an alias may not)
	errs     []error
	warnings []string
	// files are the secrets' --<flag>-file values, by secret flag.
	files map[string]*secretFile
}

// secretFile is a secret flag's --<flag>-file: a file holding the value.
type secretFile struct {
	path  string
	value *string
}

// New returns a Set for a command whose flags read OUTBOX_<FLAG>
// (outbox-relay run, kafka-dev). cmd is how the command is typed.
// getenv is os.Getenv outside tests.
func New(cmd string, getenv func(string) string) *Set {
	return newSet(cmd, "OUTBOX_", getenv)
}

// NewCommand returns a Set for an operator command whose flags read
// OUTBOX_<COMMAND>_<FLAG> (outbox-relay purge --topic is
// OUTBOX_PURGE_TOPIC), so that a deployment's variables for one command
// never reach another; flags marked Shared read OUTBOX_<FLAG>.
func NewCommand(cmd string, getenv func(string) string) *Set {
	_, name, _ := strings.Cut(cmd, " ") // "purge" of "outbox-relay purge"
	return newSet(cmd, "OUTBOX_"+envWord(strings.ReplaceAll(name, " ", "_"))+"_", getenv)
}

func newSet(cmd, prefix string, getenv func(string) string) *Set {
	if getenv == nil {
		getenv = os.Getenv
	}
	s := &Set{FlagSet: flag.NewFlagSet(cmd, flag.ContinueOnError), cmd: cmd, getenv: getenv, prefix: prefix,
		shared: map[string]bool{}, legacy: map[string]bool{}, fromEnv: map[string]string{}, withEnv: map[string]bool{},
		files: map[string]*secretFile{}}
	s.FlagSet.SetOutput(io.Discard) // errors and help are written by Parse's caller and Help
	s.FlagSet.Usage = func() {}
	return s
}

func envWord(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// EnvName is the environment variable of --kafka-brokers in a command
// made with New: OUTBOX_KAFKA_BROKERS.
func EnvName(flagName string) string { return "OUTBOX_" + envWord(flagName) }

// Env is the environment variable of one of s's flags.
func (s *Set) Env(name string) string {
	if s.shared[name] {
		return EnvName(name)
	}
	return s.prefix + envWord(name)
}

// Shared marks flags whose variable is OUTBOX_<FLAG> in every command
// (--database-url: OUTBOX_DATABASE_URL). Call it before defining them.
func (s *Set) Shared(names ...string) {
	for _, n := range names {
		s.shared[n], s.shared[n+"-file"] = true, true
	}
}

// Legacy marks flags that this command also read, in an earlier release,
// from OUTBOX_<FLAG> (purge's OUTBOX_TOPIC): the old variable still works
// for a release, with a warning. Call it before defining them.
func (s *Set) Legacy(names ...string) {
	for _, n := range names {
		s.legacy[n] = true
	}
}

// Describe sets what help says of the command: args is the synopsis of its
// positional arguments ("ID..."; "" for none, and then any is refused),
// argsHelp what they are, about what the command does.
func (s *Set) Describe(args, argsHelp, about string) {
	s.args, s.argsHelp, s.about = args, argsHelp, about
}

// Required marks flags that must be given, by flag or variable.
func (s *Set) Required(names ...string) { s.required = append(s.required, names...) }

// RequiredUnless makes name required unless flag other is given.
func (s *Set) RequiredUnless(name, other string) {
	s.Required(name)
	if s.unless == nil {
		s.unless = map[string]string{}
	}
	s.unless[name] = other
}

// Warnings are what Parse noticed that works but should change (an old
// variable name): the caller prints them.
func (s *Set) Warnings() []string { return s.warnings }

func (s *Set) env(name string) (string, bool) {
	s.withEnv[name] = true
	if v := s.getenv(s.Env(name)); v != "" {
		s.fromEnv[name] = s.Env(name)
		return v, true
	}
	if old := EnvName(name); s.legacy[name] && old != s.Env(name) {
		if v := s.getenv(old); v != "" {
			s.fromEnv[name] = old
			s.warnings = append(s.warnings, fmt.Sprintf("%s is read as --%s of %s for one more release; rename it %s",
				old, name, s.cmd, s.Env(name)))
			return v, true
		}
	}
	return "", false
}

func (s *Set) envErr(name, v, want string) {
	s.errs = append(s.errs, Usagef("%s=%q: not %s (flag --%s)", s.fromEnv[name], v, want, name))
}

// String defines a string flag.
func (s *Set) String(p *string, name, def, usage string) {
	if v, ok := s.env(name); ok {
		def = v
	}
	s.StringVar(p, name, def, usage)
}

// Secret defines a string flag whose value is a secret (a password):
// help and errors never show it. It also defines --<name>-file (variable
// <VAR>_FILE): a file holding the value, which keeps it out of process
// listings and environments.
func (s *Set) Secret(p *string, name, def, usage string) {
	s.secret(p, name, def, usage, redact.Secret)
}

// SecretURL defines a string flag whose value is a URL or DSN that may
// hold a password: help and errors show it with the password hidden.
func (s *Set) SecretURL(p *string, name, def, usage string) {
	s.secret(p, name, def, usage, redact.URL)
}

func (s *Set) secret(p *string, name, def, usage string, hide func(string) string) {
	s.String(p, name, def, usage)
	f := s.Lookup(name)
	f.DefValue = hide(f.DefValue)
	f.Value = secretValue{f.Value, hide}
	file := &secretFile{value: p}
	s.files[name] = file
	s.String(&file.path, name+"-file", "", "a file holding --"+name+" (its first line), kept out of process listings")
}

// readSecretFiles sets each secret given as a file from it; set says
// which flags the command line gave, and gains the secrets read.
func (s *Set) readSecretFiles(set map[string]bool) error {
	for name, f := range s.files {
		if f.path == "" {
			continue
		}
		if set[name] || s.fromEnv[name] != "" {
			return Usagef("--%s and --%s-file are both given (or %s and %s): give one", name, name, s.Env(name), s.Env(name+"-file"))
		}
		b, err := s.readSecretFile(name, f.path)
		if err != nil {
			return err
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if *f.value = strings.TrimSuffix(line, "\r"); *f.value == "" {
			return Usagef("--%s-file: %s is empty", name, f.path)
		}
		set[name] = true
	}
	return nil
}

// readSecretFile reads the file of secret flag name, with a warning when
// its mode lets group or others at it (chmod 600 fixes it).
func (s *Set) readSecretFile(name, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Usagef("--%s-file: %v", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		s.warnings = append(s.warnings, fmt.Sprintf("--%s-file: %s is open to group or others (mode %04o); "+
			"make it readable by its owner only (chmod 600; in Kubernetes, defaultMode: 0400)", name, path, fi.Mode().Perm()))
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, Usagef("--%s-file: %v", name, err)
	}
	return b, nil
}

// secretValue is a flag value that prints redacted.
type secretValue struct {
	flag.Value
	hide func(string) string
}

func (v secretValue) String() string { return v.hide(v.Value.String()) }

// List defines a comma-separated list flag.
func (s *Set) List(p *[]string, name, def, usage string) {
	if v, ok := s.env(name); ok {
		def = v
	}
	*p = split(def)
	s.Var(&listValue{p}, name, usage)
	s.Lookup(name).DefValue = def
}

type listValue struct{ p *[]string }

func (l *listValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *listValue) Set(v string) error { *l.p = split(v); return nil }

func split(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Int defines an int flag.
func (s *Set) Int(p *int, name string, def int, usage string) {
	if v, ok := s.env(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.envErr(name, v, "a whole number")
		} else {
			def = n
		}
	}
	s.IntVar(p, name, def, usage)
}

// Duration defines a duration flag: 500ms, 30s, 5m, 2h, 7d.
func (s *Set) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	if v, ok := s.env(name); ok {
		d, err := ParseDuration(v)
		if err != nil {
			s.envErr(name, v, "a duration such as 500ms, 30s, 2h or 7d")
		} else {
			def = d
		}
	}
	*p = def
	s.Var((*durationValue)(p), name, usage)
}

type durationValue time.Duration

func (d *durationValue) Set(v string) error {
	x, err := ParseDuration(v)
	if err != nil {
		return errors.New("not a duration such as 500ms, 30s, 2h or 7d")
	}
	*d = durationValue(x)
	return nil
}

func (d *durationValue) String() string { return FormatDuration(time.Duration(*d)) }

// ParseDuration reads a Go duration that may also count days: 7d, 1d12h.
func ParseDuration(v string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(v, 'd'); i > 0 {
		n, err := strconv.ParseFloat(v[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("time: invalid duration %q", v)
		}
		days, v = time.Duration(n*24*float64(time.Hour)), v[i+1:]
		if v == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	return days + d, nil
}

// FormatDuration writes d the way ParseDuration reads it, whole days as
// days and without zero units: 7d, 1d12h, 1m30s.
func FormatDuration(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String() // 0s, 500ms, 1.5s
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.unit)
			d -= n * u.d
		}
	}
	return b.String()
}

// Bool defines a boolean flag.
func (s *Set) Bool(p *bool, name string, def bool, usage string) {
	if v, ok := s.env(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.envErr(name, v, "true or false")
		} else {
			def = b
		}
	}
	s.BoolVar(p, name, def, usage)
}

// Parse reads args: flags, then the positional arguments if Describe
// allowed some. It returns flag.ErrHelp for -h or --help (the caller
// prints Help), and a UsageError for anything else wrong.
func (s *Set) Parse(args []string) error {
	if len(s.errs) > 0 {
		return s.errs[0]
	}
	if err := s.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return s.flagError(err)
	}
	if s.args == "" && s.NArg() > 0 {
		return Usagef("unexpected argument %q (%s takes no arguments; flags start with --)", s.Arg(0), s.cmd)
	}
	set := map[string]bool{}
	s.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := s.readSecretFiles(set); err != nil {
		return err
	}
	for _, name := range s.required {
		if other := s.unless[name]; other != "" && (set[other] || s.fromEnv[other] != "") {
			continue
		}
		if !set[name] && s.fromEnv[name] == "" {
			return Usagef("--%s is required (or %s)", name, s.Env(name))
		}
	}
	return nil
}

// flagError rewrites the flag package's error as one line with a
// suggestion.
func (s *Set) flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		var names []string
		s.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if close := Closest(name, names); close != "" {
			return Usagef("unknown flag --%s; did you mean --%s?", name, close)
		}
		return Usagef("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return Usagef("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -name: reason
		val, rest, _ := strings.Cut(rest, " for flag -")
		name, reason, _ := strings.Cut(rest, ": ")
		if reason == "parse error" {
			reason = "not a valid value"
		}
		// (A string flag, secrets included, takes any value: only numbers,
		// durations and booleans get here.)
		return Usagef("--%s %s: %s", name, val, reason)
	}
	return Usagef("%s", msg)
}

// Flag is what help and the configuration reference say of one flag.
type Flag struct {
	Name  string // without dashes: kafka-brokers
	Kind  string // string, int, duration, list, bool
	Usage string
	// Default is the default as the command line writes it; "" when
	// there is none (an empty string, 0, false, 0s).
	Default string
	Env     string // the variable that sets it; "" when none does
	// Required: the command refuses to start without it, unless
	// RequiredUnless (another flag) is given.
	Required       bool
	RequiredUnless string
}

// Command is what help and the configuration reference say of a command.
type Command struct {
	Name     string // how it is typed: outbox-relay purge
	Args     string // the positional arguments' synopsis, "" for none
	ArgsHelp string
	About    string
	Flags    []Flag // in name order
}

// Doc describes s's command and flags, as help prints them and the
// configuration reference (docs/configuration.md) lists them.
func (s *Set) Doc() Command {
	c := Command{Name: s.cmd, Args: s.args, ArgsHelp: s.argsHelp, About: s.about}
	s.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case *durationValue:
			kind = "duration"
		case *listValue:
			kind = "list"
		case secretValue:
			kind = "string"
		}
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool {
			kind = "bool"
		}
		if kind == "value" {
			kind = "string"
		}
		d := Flag{Name: f.Name, Kind: kind, Usage: usage, Required: slices.Contains(s.required, f.Name),
			RequiredUnless: s.unless[f.Name]}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			d.Default = f.DefValue
		}
		if s.withEnv[f.Name] {
			d.Env = s.Env(f.Name)
		}
		c.Flags = append(c.Flags, d)
	})
	return c
}

// Help writes the command's help: what it does, its synopsis, arguments
// and flags, each with its variable, default, and whether it is required.
func (s *Set) Help(w io.Writer) {
	c := s.Doc()
	synopsis := c.Name + " [flags]"
	if c.Args != "" {
		synopsis += " " + c.Args
	}
	fmt.Fprintf(w, "Usage: %s\n", synopsis)
	if c.About != "" {
		fmt.Fprintf(w, "\n%s\n", c.About)
	}
	if c.Args != "" {
		fmt.Fprintf(w, "\nArguments:\n  %s\n        %s\n", c.Args, c.ArgsHelp)
	}
	fmt.Fprintf(w, "\nFlags (and the environment variable that sets each):\n")
	for _, f := range c.Flags {
		line := "  --" + f.Name
		if f.Kind != "bool" {
			line += " " + f.Kind
		}
		if f.Required {
			line += "  (required)"
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "        %s\n", strings.ReplaceAll(f.Usage, "\n", "\n        "))
		var notes []string
		if f.RequiredUnless != "" {
			notes = append(notes, "not needed with --"+f.RequiredUnless)
		}
		if f.Default != "" {
			notes = append(notes, fmt.Sprintf("default %s", f.Default))
		}
		if f.Env != "" {
			notes = append(notes, f.Env)
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "        [%s]\n", strings.Join(notes, "; "))
		}
	}
}

// UsageError is a mistake in how a command was called: an unknown flag,
// a value a flag does not take, a missing required flag. The CLI prints
// it on one line with a pointer to --help and exits 64 (EX_USAGE).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// Usage marks err as a usage error (a setting that cannot work, named by
// its flag).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{msg: err.Error()}
}

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Closest is the candidate nearest to word, if one is near enough to be a
// typo of it (two edits, or a prefix), else "".
func Closest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := distance(word, c)
		if strings.HasPrefix(c, word) && len(word) >= 3 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Exit codes every command shares.
const (
	ExitError = 1
	ExitSetup = 2  // a setup problem an operator must fix
	ExitUsage = 64 // EX_USAGE
)

// Report writes err, the result of command cmd of program prog, to stderr
// as every command does and returns the exit code: 0 for nil and --help;
// ExitUsage for a usage error, on one line with a pointer to --help;
// ExitSetup when setup says err is one; else ExitError. The message's
// control characters are escaped (termsafe.Text): it may quote the database.
func Report(stderr io.Writer, prog, cmd string, err error, setup func(error) bool) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case IsUsage(err):
		fmt.Fprintf(stderr, "%s %s: %s\nRun '%s %s --help' for usage.\n", prog, cmd, termsafe.Text(err.Error()), prog, cmd)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s %s: %s\n", prog, cmd, termsafe.Text(err.Error()))
	if setup != nil && setup(err) {
		return ExitSetup
	}
	return ExitError
}
