package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// Values a writer of outbox.events (or a broker's error) could choose to
// attack the console's reader: markup, a terminal escape, a bidirectional
// override that reverses what follows it on the line.
const (
	hostileName = "<i>t</i>\x1b[31m\u202emid"
	hostileKey  = "<b>k</b>\x1b[2J\u202ecba"
	hostileType = "<u>type</u>\u202e\x1b"
)

// hostileEvent writes a FAILED event with hostile topic, key, type, header
// and a 1 MB error, and its 10 failed attempts with 1 MB errors; it
// returns its id.
func hostileEvent(t *testing.T, dbURL string) string {
	t.Helper()
	pool := pgtest.Pool(t, dbURL)
	var id string
	err := pool.QueryRow(context.Background(), `
		WITH ev AS (INSERT INTO outbox.events (topic, key, payload, event_type, headers)
		            VALUES ($1, $2, '{}', $3, jsonb_build_object('h<script>', E'v\u202eevil<script>alert(1)</script>')) RETURNING id)
		INSERT INTO outbox.deliveries (event_id, topic, key, status, attempts, failure_reason, last_error, updated_at)
		SELECT id, $1, $2, 'FAILED', 10, 'RETRIES_EXHAUSTED', E'huge \u202e<script>alert(1)</script>\x1b[2J' || repeat('x', 1 << 20),
		       '2026-11-26T10:00:00Z'
		FROM ev RETURNING event_id::text`, hostileName, hostileKey, hostileType).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
		SELECT $1::uuid, a, '2026-11-26T10:00:00Z'::timestamptz - (10 - a) * interval '1 s', NULL,
		       E'attempt \u202e<script>alert(1)</script>\x1b[2J' || repeat('y', 1 << 20)
		FROM generate_series(1, 10) a`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// inputValue is a form field's value.
var inputValue = regexp.MustCompile(` value="[^"]*"`)

// pageLimit is the most a page may weigh with one 1 MB error among its
// rows: a page shows the start of a long error, not all of it.
const pageLimit = 256 << 10

func TestConsole_HostileNamesKeysErrorsAndHeadersAreShownAsBoundedTextOnEveryNewPage(t *testing.T) {
	t.Parallel()
	srv, _, dbURL := serve(t, "")
	id := hostileEvent(t, dbURL)
	// An action on the hostile key: the actions page shows its filter.
	if code, body := postForm(t, srv, "/skip", adminToken, url.Values{"match": {"yes"}, "key": {hostileKey}, "topic": {hostileName},
		"confirm": {"yes"}, "until": {"2026-11-26T09:00:00Z"}}, ""); code != http.StatusSeeOther {
		t.Fatalf("skipping by the hostile key: %d %.300q", code, body)
	}
	span := url.Values{"since": {"2026-11-26T09:00:00Z"}, "until": {"2026-11-26T11:00:00Z"}}.Encode()
	for _, path := range []string{
		"/failed?" + url.Values{"key": {hostileKey}}.Encode(),
		"/failed?" + url.Values{"error_contains": {"huge"}}.Encode(),
		"/failed?" + span,
		"/failed?" + url.Values{"topic": {hostileName}}.Encode(),
		"/keys?" + url.Values{"topic": {hostileName}, "key": {hostileKey}}.Encode(),
		"/events/" + id,
		"/events?" + url.Values{"key": {hostileKey}}.Encode(),
		"/topics",
		"/history?" + url.Values{"topic": {hostileName}}.Encode(),
		"/held",
		"/actions",
		"/",
	} {
		code, body := get(t, srv, path, adminToken)
		if code != http.StatusOK {
			t.Errorf("%s: %d %.300q", path, code, body)
			continue
		}
		// A form's field keeps the filter as asked (to send it again);
		// everything else is shown.
		shown := inputValue.ReplaceAllString(body, "")
		for _, raw := range []string{"\x1b", "\u202e", "<script>", "<b>k", "<i>t", "<u>type"} {
			if i := strings.Index(shown, raw); i >= 0 {
				t.Errorf("%s: shows %q as is: %q", path, raw, shown[max(0, i-80):min(len(shown), i+80)])
			}
		}
		if len(body) > pageLimit {
			t.Errorf("%s: %d bytes, want at most %d with one 1 MB error and 10 attempts of 1 MB", path, len(body), pageLimit)
		}
	}
	// The whole error is still there for whoever needs it: the event's
	// page says how long it is.
	if _, body := get(t, srv, "/events/"+id, adminToken); !strings.Contains(body, "1,048,") {
		t.Errorf("the event's page does not say how long its error is")
	}
}

// The bad inputs of the new pages' parameters: a 400 naming the parameter,
// never a 5xx or PostgreSQL's words.
func TestConsole_TheNewPagesBadParametersAreA400NamingIt(t *testing.T) {
	t.Parallel()
	srv, ids, _ := serve(t, "")
	for _, c := range []struct{ path, name string }{
		{"/keys?topic=orders&key=%ff", "key"},
		{"/keys?topic=a%00b&key=k", "topic"},
		{"/keys?topic=orders", "key"},
		{"/history?topic=%fe", "topic"},
		{"/history?topic=a%00", "topic"},
		{"/failed?error_contains=a%00", "error_contains"},
		{"/failed?key=%c3%28", "key"},
		{"/failed?until=2026-13-01T00:00:00Z", "until"},
		{"/failed?since=" + url.QueryEscape(time.Now().Format(time.RFC1123)), "since"},
		{"/failed?order=sideways", "order"},
		{"/events/" + ids[0] + "?payload=%ff", "payload"},
		{"/events/not-an-id", "id"},
		{"/topics?x=%00", "x"},
	} {
		code, body := get(t, srv, c.path, readToken)
		if code != http.StatusBadRequest && !(c.name == "id" && code == http.StatusNotFound) {
			t.Errorf("%s: %d %.200q, want 400 naming %s", c.path, code, body, c.name)
			continue
		}
		if !strings.Contains(body, c.name) || strings.Contains(body, "SQLSTATE") {
			t.Errorf("%s: %q, want the parameter %s named", c.path, body, c.name)
		}
	}
}
