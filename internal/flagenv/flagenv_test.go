package flagenv_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/flagenv"
)

func TestDurations_TakeDaysAndPrintTheWayTheyAreRead(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "0.5d": 12 * time.Hour, "30s": 30 * time.Second,
		"1m30s": 90 * time.Second, "500ms": 500 * time.Millisecond,
	} {
		got, err := flagenv.ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
			continue
		}
		if back, _ := flagenv.ParseDuration(flagenv.FormatDuration(got)); back != got {
			t.Errorf("FormatDuration(%s) = %q, which reads back as %s", got, flagenv.FormatDuration(got), back)
		}
	}
	for d, want := range map[time.Duration]string{30 * time.Second: "30s", 7 * 24 * time.Hour: "7d", 90 * time.Minute: "1h30m"} {
		if got := flagenv.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for _, bad := range []string{"7x", "d", "1dd", "soon"} {
		if _, err := flagenv.ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded; want an error", bad)
		}
	}
}

func TestParse_MistakesAreOneLineUsageErrorsWithASuggestion(t *testing.T) {
	t.Parallel()
	newSet := func(env ...string) (*flagenv.Set, *int) {
		m := map[string]string{}
		for i := 0; i+1 < len(env); i += 2 {
			m[env[i]] = env[i+1]
		}
		s := flagenv.NewCommand("outbox-relay purge", func(k string) string { return m[k] })
		var batch int
		var topic string
		s.Int(&batch, "batch", 1000, "events per statement")
		s.String(&topic, "topic", "", "only this topic")
		s.Required("topic")
		return s, &batch
	}
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"Typo", []string{"--topc", "x"}, nil, "unknown flag --topc; did you mean --topic?"},
		{"NoSuchFlag", []string{"--colour", "x"}, nil, "unknown flag --colour"},
		{"BadNumber", []string{"--topic", "t", "--batch", "many"}, nil, `--batch "many": not a valid value`},
		{"MissingValue", []string{"--topic"}, nil, "--topic needs a value"},
		{"Required", nil, nil, "--topic is required (or OUTBOX_PURGE_TOPIC)"},
		{"Positional", []string{"--topic", "t", "extra"}, nil, `unexpected argument "extra"`},
		{"BadEnv", []string{"--topic", "t"}, []string{"OUTBOX_PURGE_BATCH", "x"}, `OUTBOX_PURGE_BATCH="x": not a whole number (flag --batch)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSet(tc.env...)
			err := s.Parse(tc.args)
			if !flagenv.IsUsage(err) || err.Error() != strings.TrimSpace(err.Error()) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v; want a one-line usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q; want it to say %q", err, tc.want)
			}
		})
	}
	t.Run("HelpIsNotAnError", func(t *testing.T) {
		s, _ := newSet()
		if err := s.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("--help gave %v, want flag.ErrHelp", err)
		}
	})
	t.Run("ACommandsOwnVariableOnly", func(t *testing.T) {
		s, batch := newSet("OUTBOX_BATCH", "5", "OUTBOX_PURGE_TOPIC", "t")
		if err := s.Parse(nil); err != nil || *batch != 1000 {
			t.Fatalf("OUTBOX_BATCH reached purge's --batch (%d, %v); only OUTBOX_PURGE_BATCH may", *batch, err)
		}
	})
}

func TestHelp_ShowsSecretsRedactedAndMarksRequiredFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOX_DATABASE_URL": "postgres://relay:s3cret@db/app", "OUTBOX_KAFKA_SASL_PASSWORD": "kafka-s3cret"}
	s := flagenv.New("outbox-relay run", func(k string) string { return env[k] })
	var url, pw string
	s.SecretURL(&url, "database-url", "", "PostgreSQL URL")
	s.Secret(&pw, "kafka-sasl-password", "", "SASL password")
	s.Required("database-url")
	var out bytes.Buffer
	s.Help(&out)
	help := out.String()
	if strings.Contains(help, "s3cret") {
		t.Fatalf("a secret is in the help:\n%s", help)
	}
	for _, want := range []string{"postgres://relay:xxxxx@db/app", "--database-url string  (required)", "OUTBOX_KAFKA_SASL_PASSWORD"} {
		if !strings.Contains(help, want) {
			t.Errorf("help does not say %q:\n%s", want, help)
		}
	}
	if url != "postgres://relay:s3cret@db/app" || pw != "kafka-s3cret" {
		t.Errorf("the values themselves must stay whole: %q, %q", url, pw)
	}
}

func TestSecretFiles_KeepSecretsOutOfProcessListings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := file("pw", "s3cret\n")
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string // the secret read, or the error's words
		wantErr bool
	}{
		{"FlagFile", []string{"--password-file", pw}, nil, "s3cret", false},
		{"EnvFile", nil, map[string]string{"OUTBOX_PASSWORD_FILE": pw}, "s3cret", false},
		{"FirstLineOnly", []string{"--password-file", file("crlf", "p\r\nsecond line\n")}, nil, "p", false},
		{"BothGiven", []string{"--password", "x", "--password-file", pw}, nil, "--password and --password-file are both given", true},
		{"BothGivenByEnv", []string{"--password-file", pw}, map[string]string{"OUTBOX_PASSWORD": "x"}, "both given", true},
		{"Missing", []string{"--password-file", filepath.Join(dir, "nope")}, nil, "--password-file: open", true},
		{"Empty", []string{"--password-file", file("empty", "\n")}, nil, "is empty", true},
		{"RequiredSatisfiedByTheFile", []string{"--password-file", pw}, nil, "s3cret", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := flagenv.New("outbox-relay run", func(k string) string { return c.env[k] })
			var got string
			s.Secret(&got, "password", "", "a password")
			s.Required("password")
			err := s.Parse(c.args)
			switch {
			case c.wantErr && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Parse = %v, want an error saying %q", err, c.want)
			case c.wantErr && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows the secret: %v", err)
			case !c.wantErr && (err != nil || got != c.want):
				t.Fatalf("Parse = %v, secret %q; want %q", err, got, c.want)
			}
		})
	}
}

func TestReport_EscapesControlCharactersOfTheMessage(t *testing.T) {
	t.Parallel()
	// An error may quote the database: a topic, a server's message.
	for _, err := range []error{errors.New("topic \"a\x1b]0;pwned\x07\r\"\nsecond line\tok"), flagenv.Usagef("bad \x1b[2J")} {
		var stderr bytes.Buffer
		flagenv.Report(&stderr, "outbox-relay", "failed", err, nil)
		for _, c := range stderr.Bytes() {
			if c < 0x20 && c != '\n' && c != '\t' {
				t.Errorf("Report printed control byte %#x raw: %q", c, stderr.String())
				break
			}
		}
		if !strings.Contains(stderr.String(), `\x1b`) {
			t.Errorf("Report printed %q, want ESC as \\x1b", stderr.String())
		}
	}
}

func TestSecretFiles_OpenToGroupOrOthersAreWarnedAbout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for mode, warn := range map[os.FileMode]bool{0o600: false, 0o400: false, 0o640: true, 0o644: true, 0o604: true} {
		p := filepath.Join(dir, mode.String())
		if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not the umask's
			t.Fatal(err)
		}
		s := flagenv.New("outbox-relay run", func(string) string { return "" })
		var got string
		s.Secret(&got, "kafka-sasl-password", "", "a password")
		if err := s.Parse([]string{"--kafka-sasl-password-file", p}); err != nil || got != "s3cret" {
			t.Fatalf("mode %04o: Parse = %v, secret %q", mode, err, got)
		}
		warned := strings.Join(s.Warnings(), "\n")
		if warn != strings.Contains(warned, "--kafka-sasl-password-file: "+p+" is open to group or others") {
			t.Errorf("mode %04o: warnings %q; want a warning: %v", mode, warned, warn)
		}
		if strings.Contains(warned, "s3cret") {
			t.Errorf("the warning shows the secret: %q", warned)
		}
	}
}
