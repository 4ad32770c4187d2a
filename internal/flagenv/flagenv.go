// Package flagenv defines command-line flags whose defaults come from
// OUTBOX_* environment variables, so every knob has both.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Set is a flag.FlagSet that also reads environment variables.
type Set struct {
	*flag.FlagSet
	getenv func(string) string
	errs   []error
}

// New returns a Set for one subcommand. getenv is os.Getenv outside tests.
func New(name string, getenv func(string) string) *Set {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Set{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv}
}

// EnvName is the environment variable for a flag: --kafka-brokers is
// OUTBOX_KAFKA_BROKERS.
func EnvName(flagName string) string {
	return "OUTBOX_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (s *Set) env(name string) (string, bool) {
	v := s.getenv(EnvName(name))
	return v, v != ""
}

func (s *Set) usage(name, usage string) string {
	return fmt.Sprintf("%s (env %s)", usage, EnvName(name))
}

// String defines a string flag.
func (s *Set) String(p *string, name, def, usage string) {
	if v, ok := s.env(name); ok {
		def = v
	}
	s.StringVar(p, name, def, s.usage(name, usage))
}

// List defines a comma-separated list flag.
func (s *Set) List(p *[]string, name, def, usage string) {
	if v, ok := s.env(name); ok {
		def = v
	}
	*p = split(def)
	s.Func(name, s.usage(name, usage)+fmt.Sprintf(" (default %q)", def), func(v string) error {
		*p = split(v)
		return nil
	})
}

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
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a whole number (flag --%s)", EnvName(name), v, name))
		} else {
			def = n
		}
	}
	s.IntVar(p, name, def, s.usage(name, usage))
}

// Duration defines a duration flag (such as 500ms, 30s, 5m).
func (s *Set) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	if v, ok := s.env(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not a duration such as 500ms or 30s (flag --%s)", EnvName(name), v, name))
		} else {
			def = d
		}
	}
	s.DurationVar(p, name, def, s.usage(name, usage))
}

// Bool defines a boolean flag.
func (s *Set) Bool(p *bool, name string, def bool, usage string) {
	if v, ok := s.env(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: not true or false (flag --%s)", EnvName(name), v, name))
		} else {
			def = b
		}
	}
	s.BoolVar(p, name, def, s.usage(name, usage))
}

// Parse parses args after reporting any unreadable environment variable.
func (s *Set) Parse(args []string) error {
	if len(s.errs) > 0 {
		return s.errs[0]
	}
	if err := s.FlagSet.Parse(args); err != nil {
		return err
	}
	if s.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", s.Arg(0))
	}
	return nil
}
