package relay_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/relay"
)

// The Debezium conformance corpus (../shared/conformance/debezium, beside the
// repository; OUTBOX_DEBEZIUM_CORPUS names another folder): records made by
// Debezium 3.6.1's Outbox Event Router and Kafka Connect's converters. Each
// case runs end to end: its DDL, the tables put in the publication as
// `migrate --debezium-config` does, a relay with the case's connector
// configuration read by mapping.ParseDebezium (run --debezium-config's
// path), its transactions, and a broker with 3 partitions per topic.
//
// OUTBOX_DEBEZIUM_CASES=sample runs every fifth case only (scripts/test.sh
// sets it for the PostgreSQL majors after the first).

// knownDifferences are the cases where the relay still differs from
// Debezium, each with the reason; README "Coming from Debezium" lists them
// too. A case listed here that passes fails the test, so the list stays
// true.
var knownDifferences = map[string]string{}

// relayOwnHeader is the header the relay adds after Debezium's (README:
// each record also carries outbox-event-id, the status row's id).
const relayOwnHeader = kafka.HeaderEventID

// runIDShape is the shape of Debezium's __debezium.context.runId: a UUIDv7.
var runIDShape = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

type dbzBytes struct {
	B64  *string `json:"b64"`
	UTF8 *string `json:"utf8"`
}

func (b dbzBytes) bytes(t *testing.T) []byte {
	if b.B64 == nil {
		return nil
	}
	v, err := base64.StdEncoding.DecodeString(*b.B64)
	if err != nil {
		t.Fatalf("corpus: bad base64 %q: %v", *b.B64, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v
}

type dbzCase struct {
	ID           string     `json:"id"`
	Title        string     `json:"title"`
	Table        string     `json:"table"`
	DDL          []string   `json:"ddl"`
	Transactions [][]string `json:"transactions"`
	Connector    struct {
		Config map[string]string `json:"config"`
	} `json:"connector"`
	ChangeEvents []struct {
		Event   int                `json:"event"`
		Op      string             `json:"op"`
		RowText map[string]*string `json:"row_text"`
	} `json:"change_events"`
	Expected struct {
		Summary string   `json:"summary"`
		Topics  []string `json:"topics"`
		Failure *struct {
			Stage     string `json:"stage"`
			AtEvent   int    `json:"at_event"`
			Exception string `json:"exception"`
			Stalls    bool   `json:"stalls"`
			Topic     string `json:"topic"`
		} `json:"failure"`
		Records []struct {
			Event     int          `json:"event"`
			Topic     string       `json:"topic"`
			Partition *int32       `json:"partition"`
			Key       dbzBytes     `json:"key"`
			Value     dbzBytes     `json:"value"`
			Headers   [][2]*string `json:"headers"`
			Timestamp struct {
				Rule string `json:"rule"`
				Ms   int64  `json:"ms"`
			} `json:"timestamp"`
		} `json:"records"`
	} `json:"expected"`
}

func debeziumCorpus(t *testing.T) []string {
	dir := os.Getenv("OUTBOX_DEBEZIUM_CORPUS")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "conformance", "debezium")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Debezium corpus is not at %s (set OUTBOX_DEBEZIUM_CORPUS)", dir)
		}
		t.Skipf("the Debezium corpus is not at %s (set OUTBOX_DEBEZIUM_CORPUS)", dir)
	}
	sort.Strings(files)
	if os.Getenv("OUTBOX_DEBEZIUM_CASES") == "sample" {
		var some []string
		for i := 0; i < len(files); i += 5 {
			some = append(some, files[i])
		}
		files = some
	}
	return files
}

func TestDebeziumConformance_EveryCaseOfTheCorpusComesOutAsDebeziumsRecords(t *testing.T) {
	files := debeziumCorpus(t)
	var mu sync.Mutex
	results := map[string]string{}
	t.Cleanup(func() {
		var lines []string
		pass := 0
		for id, r := range results {
			lines = append(lines, fmt.Sprintf("  %-45s %s", id, r))
			if r == "pass" {
				pass++
			}
		}
		sort.Strings(lines)
		summary := fmt.Sprintf("Debezium conformance: %d of %d cases pass", pass, len(results))
		t.Logf("%s\n%s", summary, strings.Join(lines, "\n"))
		// scripts/test.sh prints the report after the run: the summary and
		// every case that does not pass.
		if path := os.Getenv("OUTBOX_TEST_REPORT"); path != "" {
			if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintf(f, "%s: %s\n", t.Name(), summary)
				for _, l := range lines {
					if !strings.HasSuffix(l, " pass") {
						fmt.Fprintln(f, l)
					}
				}
				f.Close()
			}
		}
	})
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var c dbzCase
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			diffs := runDebeziumCase(t, file, &c)
			known, isKnown := knownDifferences[c.ID]
			mu.Lock()
			defer mu.Unlock()
			switch {
			case len(diffs) == 0 && isKnown:
				results[c.ID] = "pass (listed as a known difference: remove it from knownDifferences)"
				t.Errorf("%s passes: remove it from knownDifferences (%s)", c.ID, known)
			case len(diffs) == 0:
				results[c.ID] = "pass"
			case isKnown:
				results[c.ID] = "KNOWN DIFFERENCE: " + known
				t.Logf("KNOWN DIFFERENCE (%s): %s\n  %s", known, c.Title, strings.Join(diffs, "\n  "))
			default:
				results[c.ID] = "FAIL: " + diffs[0]
				t.Errorf("%s (%s) differs from Debezium:\n  %s", c.ID, c.Title, strings.Join(diffs, "\n  "))
			}
		})
	}
}

// runDebeziumCase runs one case and returns how the relay's records differ
// from the case's, one line each.
func runDebeziumCase(t *testing.T, file string, c *dbzCase) (diffs []string) {
	differ := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	failure := c.Expected.Failure
	topics := slices.Clone(c.Expected.Topics)
	if failure != nil && failure.Topic != "" && !slices.Contains(topics, failure.Topic) {
		topics = append(topics, failure.Topic)
	}
	b := setup(t, kfake.SeedTopics(3, topics...))
	for _, ddl := range c.DDL {
		b.exec(t, ddl)
	}

	d, err := mapping.ParseDebezium(filepath.Base(file), c.Connector.Config)
	if err != nil {
		if failure != nil {
			t.Logf("the relay refuses the configuration at start (Debezium's task fails at %s): %v", failure.Stage, err)
			return nil
		}
		differ("the relay refuses the configuration: %v", err)
		return diffs
	}
	cfg := b.config(t)
	cfg.Logger = zaptest.NewLogger(t)
	cfg.Tables = b.mapped(t, d.Tables)
	r, err := relay.New(cfg)
	if err != nil {
		differ("relay.New: %v", err)
		return diffs
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		r.Close()
	})
	var runErr error
	pgtest.Eventually(t, 30*time.Second, "the relay streams or stops", func() (bool, string) {
		select {
		case runErr = <-done:
			done <- runErr
			return true, ""
		default:
		}
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM pg_replication_slots s
			JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = $1 AND r.state = 'streaming'`, cfg.Slot)
		return n == 1, "not streaming yet"
	})
	if runErr != nil {
		if failure != nil && (errors.Is(runErr, cdc.ErrSetup) || errors.Is(runErr, relay.ErrBadTable)) {
			t.Logf("the relay refuses the table at start (Debezium's task fails at %s): %v", failure.Stage, runErr)
			return nil
		}
		differ("the relay stopped at start: %v", runErr)
		return diffs
	}

	begin := time.Now().Truncate(time.Millisecond)
	for _, tx := range c.Transactions {
		b.exec(t, "BEGIN;\n"+strings.Join(tx, ";\n")+";\nCOMMIT")
	}
	inserts := 0
	for _, ev := range c.ChangeEvents {
		if ev.Op == "c" {
			inserts++
		}
	}
	pgtest.Eventually(t, 30*time.Second, "every insert SENT or FAILED", func() (bool, string) {
		n := pgtest.Count(t, b.pool, `SELECT count(*) FROM outbox.deliveries WHERE status IN ('SENT', 'FAILED')`)
		return n >= inserts, fmt.Sprintf("%d of %d; %s", n, inserts, b.statusCounts(t))
	})
	end := time.Now()

	got := consumeAll(t, b.brokers, topics)
	idColumn := d.Tables[0].ID
	used := make([]bool, len(got))
	for i, want := range c.Expected.Records {
		what := fmt.Sprintf("record %d (event %d)", i+1, want.Event)
		var idText string
		for _, h := range want.Headers {
			if *h[0] == "id" && h[1] != nil {
				v, _ := base64.StdEncoding.DecodeString(*h[1])
				idText = string(v)
			}
		}
		j := slices.IndexFunc(got, func(r *kgo.Record) bool {
			v, ok := header(r, "id")
			return ok && v == idText
		})
		for j >= 0 && used[j] {
			k := slices.IndexFunc(got[j+1:], func(r *kgo.Record) bool { v, ok := header(r, "id"); return ok && v == idText })
			if k < 0 {
				j = -1
			} else {
				j += 1 + k
			}
		}
		if j < 0 {
			differ("%s: no record with header id=%q; status: %s", what, idText, eventStatus(t, b, c.Table, idText))
			continue
		}
		used[j] = true
		rec := got[j]
		if rec.Topic != want.Topic {
			differ("%s: topic %q, Debezium's %q", what, rec.Topic, want.Topic)
		}
		if want.Partition != nil && rec.Partition != *want.Partition {
			differ("%s: partition %d, Debezium's %d", what, rec.Partition, *want.Partition)
		}
		if k := want.Key.bytes(t); !sameBytes(rec.Key, k) {
			differ("%s: key\n      relay:    %s\n      Debezium: %s", what, showBytes(rec.Key), showBytes(k))
		}
		if v := want.Value.bytes(t); !sameBytes(rec.Value, v) {
			differ("%s: value\n      relay:    %s\n      Debezium: %s", what, showBytes(rec.Value), showBytes(v))
		}
		if hd := headerDiff(rec.Headers, want.Headers); hd != "" {
			differ("%s: headers %s", what, hd)
		}
		ts := rec.Timestamp.UnixMilli()
		switch want.Timestamp.Rule {
		case "column":
			if ts != want.Timestamp.Ms {
				differ("%s: timestamp %d ms, Debezium's %d (the timestamp column)", what, ts, want.Timestamp.Ms)
			}
		default: // Debezium's processing time: at or after the commit
			if ts < begin.UnixMilli() || ts > end.UnixMilli() {
				differ("%s: timestamp %s is not the event's processing time (%s to %s)", what,
					rec.Timestamp.UTC(), begin.UTC(), end.UTC())
			}
		}
	}
	for j, rec := range got {
		if used[j] {
			continue
		}
		id, _ := header(rec, "id")
		at := eventOf(c, idColumn, id)
		if failure != nil && at >= failure.AtEvent && at != failure.AtEvent {
			continue // Debezium's task stopped before it; the relay goes on
		}
		differ("a record Debezium does not produce: topic %q key %s value %s id=%q", rec.Topic, showBytes(rec.Key), showBytes(rec.Value), id)
	}
	if failure != nil {
		var id string
		for _, ev := range c.ChangeEvents {
			if ev.Event == failure.AtEvent && ev.RowText[idColumn] != nil {
				id = *ev.RowText[idColumn]
			}
		}
		var status, reason, lastErr string
		err := b.pool.QueryRow(context.Background(), `SELECT status, coalesce(failure_reason, ''), coalesce(last_error, '')
			FROM outbox.deliveries WHERE event_id = outbox.event_id($1, $2)`, c.Table, id).Scan(&status, &reason, &lastErr)
		switch {
		case err != nil:
			differ("event %d (Debezium fails at %s: %s): no status row: %v", failure.AtEvent, failure.Stage, failure.Exception, err)
		case status != "FAILED" || lastErr == "":
			differ("event %d (Debezium fails at %s: %s): the relay's status is %s", failure.AtEvent, failure.Stage, failure.Exception, status)
		default:
			t.Logf("event %d FAILED %s: %s (Debezium: %s)", failure.AtEvent, reason, lastErr, failure.Exception)
		}
	}
	return diffs
}

// eventOf returns the change event whose id column is id, 0 when none.
func eventOf(c *dbzCase, idColumn, id string) int {
	for _, ev := range c.ChangeEvents {
		if v := ev.RowText[idColumn]; ev.Op == "c" && v != nil && strings.EqualFold(*v, id) {
			return ev.Event
		}
	}
	return 0
}

// eventStatus describes the status row of the event id of table.
func eventStatus(t *testing.T, b *testBundle, table, id string) string {
	var status, reason, lastErr string
	if err := b.pool.QueryRow(context.Background(), `SELECT status, coalesce(failure_reason, ''), coalesce(last_error, '')
		FROM outbox.deliveries WHERE event_id = outbox.event_id($1, $2)`, table, id).Scan(&status, &reason, &lastErr); err != nil {
		return "none (" + err.Error() + ")"
	}
	return strings.TrimSpace(status + " " + reason + " " + lastErr)
}

// headerDiff compares a record's headers with Debezium's, in order:
// Debezium's runId by its shape, the relay's own header allowed last.
func headerDiff(got []kgo.RecordHeader, want [][2]*string) string {
	if n := len(got); n > 0 && got[n-1].Key == relayOwnHeader {
		got = got[:n-1]
	}
	show := func(name string, v []byte, null bool) string {
		if null {
			return name + "=<null>"
		}
		return name + "=" + showBytes(v)
	}
	var g, w []string
	for _, h := range got {
		g = append(g, show(h.Key, h.Value, h.Value == nil))
	}
	ok := len(got) == len(want)
	for i, h := range want {
		var v []byte
		if h[1] != nil {
			v, _ = base64.StdEncoding.DecodeString(*h[1])
			if v == nil {
				v = []byte{}
			}
		}
		w = append(w, show(*h[0], v, h[1] == nil))
		if i >= len(got) {
			continue
		}
		gh := got[i]
		switch {
		case gh.Key != *h[0]:
			ok = false
		case *h[0] == "__debezium.context.runId":
			if !runIDShape.Match(bytes.Trim(gh.Value, `"`)) || len(gh.Value) != len(v) { // JsonConverter quotes it
				ok = false
			}
			w[i] = *h[0] + "=<a UUIDv7>"
		case h[1] == nil:
			if gh.Value != nil {
				ok = false
			}
		case !bytes.Equal(gh.Value, v) || gh.Value == nil:
			ok = false
		}
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("\n      relay:    %s\n      Debezium: %s", strings.Join(g, " "), strings.Join(w, " "))
}

// sameBytes: both null, or both non-null and equal.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func showBytes(v []byte) string {
	if v == nil {
		return "<null>"
	}
	if utf8.Valid(v) {
		return strconv.Quote(string(v))
	}
	return "0x" + fmt.Sprintf("%x", v)
}

// consumeAll reads every record of topics.
func consumeAll(t *testing.T, brokers []string, topics []string) []*kgo.Record {
	t.Helper()
	cl := newKgo(t, brokers)
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	if total == 0 {
		return nil
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(recs) < total {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(recs), total)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Timestamp.Before(recs[j].Timestamp) })
	return recs
}
