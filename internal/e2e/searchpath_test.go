package e2e

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/migrations"
)

// plantedRole is the application's role of the search_path test: a member
// of outbox_writer, nothing more, that may create objects in schema public
// (PostgreSQL 14's default; 15 and later where GRANT CREATE ON SCHEMA
// public TO PUBLIC was kept).
const plantedRole = "outbox_test_planter"

// plantedMark is in the error a planted function raises where it cannot
// record its call (a read-only transaction): the process logs it.
const plantedMark = "planted function public."

// A writer creates, in schema public, an overload of every built-in
// function the project's SQL calls (each name found in the SQL itself), of
// the built-in's argument types and of looser ones that would win over it
// where an argument's type is not exactly the built-in's (an integer for a
// bigint, text for a name or a regclass, a concrete type for a polymorphic
// one). Each records its call. Then these run, and none of them calls any:
// migrate (twice, with a mapped table); run (the backfill of a new slot,
// the stream, a stuck row rescued, a retry, failures with their dead
// letters, a held key, a mapped event's kept record resent, retention);
// the SQL functions and views as an operator calls them; every operator
// command; every console page and action; migrate down a version and up
// again. Every connection of the binary has search_path pg_catalog,
// pg_temp, and every function of the outbox fixes its own (the writer's
// INSERT runs the column defaults' with the writer's search_path, an
// operator's psql runs outbox.resend with the operator's).
func TestSearchPath_FunctionsAWriterPlantsInPublicAreNeverCalled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDB(t)
	safe := pgtest.Pool(t, withSafePath(t, dbURL))
	execSQL := func(sql string, args ...any) {
		t.Helper()
		if _, err := safe.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	execSQL(`GRANT CREATE ON SCHEMA public TO PUBLIC`)
	execSQL(`DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = '` + plantedRole + `') THEN
			CREATE ROLE ` + plantedRole + ` LOGIN;
		END IF;
	EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; -- another test process made it
	END $$`)
	// The application's own outbox table, Debezium's shape.
	execSQL(`CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);
		GRANT INSERT, SELECT (id) ON public.outboxevent TO ` + plantedRole)
	connector := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(connector, []byte(debeziumConnector), 0o600); err != nil {
		t.Fatal(err)
	}
	names := sqlFunctionNames(t, safe)
	for _, want := range []string{"pg_advisory_xact_lock", "hashtext", "hashtextextended", "convert_to", "format",
		"unnest", "array_agg", "to_jsonb", "set_bit", "nextval", "now"} {
		if !slices.Contains(names, want) {
			t.Fatalf("the project's SQL calls %s, which the test did not find among %v", want, names)
		}
	}
	planted := plant(t, dbURL, names)

	var procs []*proc // every process of the binary, whose output calledPlanted reads
	t.Cleanup(func() {
		if t.Failed() { // what went wrong: a planted function a failed step called
			t.Logf("planted functions called: %v", calledPlanted(t, safe, procs))
		}
	})
	cli := func(dbURL string, args ...string) {
		t.Helper()
		p := start(t, "outbox-relay", args, "OUTBOX_DATABASE_URL="+dbURL)
		procs = append(procs, p)
		if code := p.wait(t, 60*time.Second); code != 0 {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("outbox-relay %s exited %d:\n%s", strings.Join(args, " "), code, strings.Join(p.out, "\n"))
		}
	}
	cli(dbURL, "migrate", "--debezium-config", connector)
	cli(dbURL, "migrate", "--debezium-config", connector)
	pgtest.LoginRoles(t, dbURL)
	execSQL(`GRANT outbox_writer TO ` + plantedRole)

	// The writer's own INSERTs (the column defaults run with its
	// search_path): events before the slot (the backfill's), one on a
	// topic the relay may not publish (FAILED, its dead letter) with one
	// of its key held behind it.
	writer := pgtest.Pool(t, asUser(t, dbURL, plantedRole))
	insert := func(topic, key string) string {
		t.Helper()
		var id string
		if err := writer.QueryRow(ctx, `INSERT INTO outbox.events (topic, key, payload) VALUES ($1, $2, '{"n": 1}')
			RETURNING id`, topic, key).Scan(&id); err != nil {
			t.Fatalf("the writer's INSERT: %v", err)
		}
		return id
	}
	mapped := func(aggregate, key string) string {
		t.Helper()
		var id string
		if err := writer.QueryRow(ctx, `INSERT INTO public.outboxevent (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), $1, $2, 'Created', '{"n": 1}') RETURNING id`, aggregate, key).Scan(&id); err != nil {
			t.Fatalf("the writer's INSERT into its own table: %v", err)
		}
		return id
	}
	before := []string{insert("orders", "a"), insert("orders", "b")}
	failing := insert("forbidden", "h")
	heldID := insert("forbidden", "h")
	mappedBefore := mapped("orders", "m")
	// A row its relay left PROCESSING (the rescue), one waiting for its
	// second attempt (the retry) and one SENT long ago (retention).
	stuck, retry, old := insert("orders", "s"), insert("orders", "r"), insert("orders", "o")
	execSQL(`INSERT INTO outbox.deliveries (event_id, status, attempts, locked_by, locked_at, topic, key, commit_lsn, tx_position)
		VALUES ($1, 'PROCESSING', 1, 'gone', now() - interval '1 hour', 'orders', 's', '0/0', 0)`, stuck)
	execSQL(`INSERT INTO outbox.deliveries (event_id, status, attempts, last_error, next_attempt_at, topic, key, commit_lsn, tx_position)
		VALUES ($1, 'PENDING', 1, 'broker down', now(), 'orders', 'r', '0/0', 0)`, retry)
	execSQL(`UPDATE outbox.events SET created_at = now() - interval '3 days' WHERE id = $1`, old)
	execSQL(`INSERT INTO outbox.deliveries (event_id, status, attempts, sent_at) VALUES ($1, 'SENT', 1, now() - interval '3 days')`, old)

	port := pgtest.FreePort(t)
	var db string
	if err := safe.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	e := &env{dbURL: dbURL, slot: "slot_" + strings.TrimPrefix(db, "outbox_test_"), pool: safe,
		brokers: fmt.Sprintf("127.0.0.1:%d", port), kafka: kafkaOn(t, port, "orders:1,dlt:1,outbox.event.orders:1"), kafkaPort: port}
	relay := e.relay(t, "--topics", "orders,outbox.event.orders", "--dead-letter-topic", "dlt", "--failed-key-policy", "hold",
		"--stuck-threshold", "1s", "--poll-interval", "50ms", "--retention", "24h", "--debezium-config", connector)
	procs = append(procs, relay)
	live, mappedLive, mappedFailing := insert("orders", "a"), mapped("orders", "m"), mapped("forbidden", "f")
	status := func(where string, arg any) string {
		var s string
		_ = safe.QueryRow(ctx, `SELECT status || coalesce('/' || dead_letter_status, '') FROM outbox.deliveries WHERE `+where, arg).Scan(&s)
		return s
	}
	byID := func(id string) string { return status("event_id = $1", id) }
	byMapped := func(id string) string { return status("event_id = outbox.event_id('public.outboxevent', $1)", id) }
	relayed := func() (bool, string) {
		got := map[string]string{"before": byID(before[0]) + "," + byID(before[1]), "live": byID(live),
			"stuck": byID(stuck), "retry": byID(retry), "failing": byID(failing), "held": byID(heldID),
			"mapped": byMapped(mappedBefore) + "," + byMapped(mappedLive), "mapped failing": byMapped(mappedFailing)}
		var gone bool
		_ = safe.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM outbox.events WHERE id = $1)`, old).Scan(&gone)
		return got["before"] == "SENT,SENT" && got["live"] == "SENT" && got["stuck"] == "SENT" && got["retry"] == "SENT" &&
				got["failing"] == "FAILED/SENT" && got["held"] != "" && got["mapped"] == "SENT,SENT" &&
				got["mapped failing"] == "FAILED/SENT" && gone,
			fmt.Sprintf("%v, old event deleted: %v", got, gone)
	}
	pgtest.Eventually(t, 60*time.Second, "every event relayed, the failures dead-lettered, the old event retained away", relayed)

	// An operator resends the failed mapped event in SQL, by its table's
	// id, with the operator's own search_path: the relay publishes its kept
	// record again (and it fails again).
	operator := pgtest.Pool(t, pgtest.OperatorURL(dbURL))
	var resent time.Time
	if err := operator.QueryRow(ctx, `SELECT now() FROM outbox.resend('public.outboxevent', $1) AS r WHERE r`,
		mappedFailing).Scan(&resent); err != nil {
		t.Fatalf("outbox.resend('public.outboxevent', id): %v", err)
	}
	pgtest.Eventually(t, 30*time.Second, "the resent mapped event failed again", func() (bool, string) {
		var again bool
		_ = safe.QueryRow(ctx, `SELECT updated_at > $2 FROM outbox.deliveries WHERE status = 'FAILED'
			AND event_id = outbox.event_id('public.outboxevent', $1)`, mappedFailing, resent).Scan(&again)
		return again, byMapped(mappedFailing)
	})
	relay.signal(t, syscall.SIGTERM)
	if code := relay.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the relay exited %d after SIGTERM", code)
	}

	// The operator's SQL functions and views, with the operator's
	// search_path.
	for _, sql := range []string{
		`SELECT outbox.skip($1::uuid)`, `SELECT outbox.resend($1::uuid)`, `SELECT outbox.resend_failed(p_topic => 'x')`,
		`SELECT outbox.skip_failed(p_topic => 'x')`, `SELECT outbox.purge('1 hour', 'SKIPPED')`,
		`SELECT count(*) FROM outbox.failed_events`, `SELECT count(*) FROM outbox.delivery_stats`,
		`SELECT count(*) FROM outbox.held_keys`, `SELECT count(*) FROM outbox.relayed_events`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = append(args, failing)
		}
		if _, err := operator.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("as an operator, %s: %v", sql, err)
		}
	}
	// Every operator command, as the operator, on the failure again.
	execSQL(`UPDATE outbox.deliveries SET status = 'FAILED', failure_reason = 'RETRIES_EXHAUSTED' WHERE event_id = $1`, failing)
	op := pgtest.OperatorURL(dbURL)
	for _, args := range [][]string{
		{"status"}, {"status", "--format", "json"}, {"failed"}, {"failed", "--count"}, {"failed", "--format", "json"},
		{"held"}, {"held", "--format", "json"}, {"skip", failing}, {"resend", failing}, {"resend", "--failed", "--topic", "x"},
		{"skip", "--failed", "--reason", "x"}, {"purge", "--older-than", "1h", "--status", "FAILED"},
		{"purge", "--older-than", "1h", "--status", "SKIPPED"}, {"purge", "--older-than", "1h"},
	} {
		cli(op, args...)
	}

	// Every console page and action, as its admin.
	addr := fmt.Sprintf("127.0.0.1:%d", pgtest.FreePort(t))
	console := start(t, "outbox-relay", []string{"console", "--listen", addr, "--admin-token", "admin-token-0123456789", "--failed-key-policy", "hold"}, "OUTBOX_DATABASE_URL="+op)
	procs = append(procs, console)
	consoleDo := func(method, path string, form url.Values) {
		t.Helper()
		var code int
		var text string
		pgtest.Eventually(t, 30*time.Second, "the console answering "+method+" "+path, func() (bool, string) {
			req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(form.Encode()))
			req.SetBasicAuth("ops", "admin-token-0123456789")
			if form != nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := cl.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			code, text = resp.StatusCode, string(b)
			return true, ""
		})
		if code != http.StatusOK && code != http.StatusSeeOther {
			t.Fatalf("console %s %s: %d %.300s", method, path, code, text)
		}
	}
	mappedID := ""
	if err := safe.QueryRow(ctx, `SELECT outbox.event_id('public.outboxevent', $1)::text`, mappedFailing).Scan(&mappedID); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/failed", "/failed?topic=forbidden&reason=INVALID_TOPIC", "/failed?order=oldest&event_type=x",
		"/held", "/held?topic=forbidden", "/topics", "/keys?topic=orders&key=a", "/actions",
		"/events", "/events?status=SENT&topic=orders&key=a&event_type=x&reason=INVALID_TOPIC", "/events?lookup=a",
		"/events/" + live + "/payload",
		"/events?status=FAILED&since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00Z", "/events/" + live,
		"/events/" + live + "?payload=show", "/events/" + mappedID + "?payload=show", "/static/console.js"} {
		consoleDo(http.MethodGet, path, nil)
	}
	for _, a := range []string{"/resend", "/skip"} {
		consoleDo(http.MethodPost, a, url.Values{"id": {live}})
		consoleDo(http.MethodPost, a, url.Values{"id": {live}, "confirm": {"yes"}})
		consoleDo(http.MethodPost, a, url.Values{"match": {"yes"}, "topic": {"orders"}})
		consoleDo(http.MethodPost, a, url.Values{"match": {"yes"}, "topic": {"orders"}, "confirm": {"yes"}})
	}
	console.signal(t, syscall.SIGTERM)
	console.wait(t, 30*time.Second)

	// Back a version and up again.
	cli(dbURL, "migrate", "--down-to", strconv.Itoa(migrations.Latest()-1))
	cli(dbURL, "migrate", "--debezium-config", connector)

	if called := calledPlanted(t, safe, procs); len(called) > 0 {
		t.Fatalf("the binary called functions a writer planted in schema public: %s", strings.Join(called, ", "))
	}
	report(t, "%d overloads of the %d built-ins the SQL calls, planted in public by a writer: none called", planted, len(names))
}

// calledPlanted lists the planted functions that were called: their
// sequences advanced, or their error (in a read-only transaction) in the
// output of procs.
func calledPlanted(t *testing.T, db *pgxpool.Pool, procs []*proc) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT substr(sequencename, 8) FROM pg_catalog.pg_sequences
		WHERE schemaname = 'public' AND sequencename LIKE 'called:%' AND last_value IS NOT NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	called, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		p.mu.Lock()
		for _, l := range p.out {
			if i := strings.Index(l, plantedMark); i >= 0 {
				called = append(called, l[i+len(plantedMark):]+" (in a read-only transaction)")
			}
		}
		p.mu.Unlock()
	}
	return called
}

// sqlFunctionNames finds the built-in functions the project's SQL calls: a
// name followed by "(" in its .sql files and in the string literals of its
// Go code (tests and test helpers aside) that pg_catalog has a function or
// an aggregate of.
func sqlFunctionNames(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) []string {
	t.Helper()
	root := filepath.Join("..", "..")
	skip := map[string]bool{"cmd/outbox-bench": true, "cmd/kafka-dev": true, "internal/pgtest": true,
		"internal/kafkatest": true, "internal/e2e": true, "docs": true, "scripts": true, ".git": true}
	var text strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skip[filepath.ToSlash(rel)] || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".sql"):
			b, err := os.ReadFile(path)
			text.Write(b)
			return err
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						text.WriteString(s + "\n")
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the project's SQL: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?i)\b([a-z_][a-z0-9_]*)\s*\(`).FindAllStringSubmatch(text.String(), -1) {
		seen[strings.ToLower(m[1])] = true
	}
	var words []string
	for w := range seen {
		words = append(words, w)
	}
	rows, err := db.Query(context.Background(), `SELECT DISTINCT proname::text FROM pg_catalog.pg_proc
		WHERE pronamespace = 'pg_catalog'::regnamespace AND prokind IN ('f', 'a') AND proname = ANY($1) ORDER BY 1`, words)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A signature of a pg_catalog function or aggregate.
type builtin struct {
	name     string
	agg      bool
	args     []string // format_type of each
	ret      string
	set      bool
	variadic bool
}

var (
	// polymorphic argument types, and the concrete types a planted overload
	// takes instead: the types the project's SQL passes.
	polyElem  = map[string]bool{"anyelement": true, "anynonarray": true, "anycompatible": true, "anycompatiblenonarray": true, `"any"`: true}
	polyArray = map[string]bool{"anyarray": true, "anycompatiblearray": true}
	concrete  = []string{"text", "integer", "bigint", "uuid", "jsonb", "timestamp with time zone", "bytea", "boolean",
		"pg_lsn", "pg_catalog.pg_replication_slots"}
	// looser is, for an argument type, one a call that does not cast
	// exactly passes: an integer literal or int4 expression for a bigint,
	// an untyped literal (text wins) for a name or a regclass.
	looser = map[string]string{"bigint": "integer", "smallint": "integer", "numeric": "integer", "double precision": "integer",
		"real": "integer", "oid": "integer", "name": "text", `"char"`: "text", "character varying": "text", "regclass": "text",
		"regproc": "text", "regprocedure": "text", "regtype": "text", "regrole": "text", "regnamespace": "text", "regconfig": "text"}
)

// overloads returns the argument lists (and return type) of the
// overloads planted for b: its own and the looser one, with each
// polymorphic type made each concrete type, and a variadic one's list
// spelled out with 0, 1 and 2 values.
func (b builtin) overloads() (out [][2][]string) {
	bases := [][]string{b.args}
	if b.variadic && len(b.args) > 0 {
		last := b.args[len(b.args)-1]
		elem := strings.TrimSuffix(last, "[]")
		switch last {
		case "anyarray":
			elem = "anyelement"
		case "anycompatiblearray":
			elem = "anycompatible"
		}
		bases = nil
		for k := 0; k <= 2; k++ {
			bases = append(bases, append(slices.Clone(b.args[:len(b.args)-1]), slices.Repeat([]string{elem}, k)...))
		}
	}
	for _, base := range bases {
		for _, loose := range []bool{false, true} {
			args := slices.Clone(base)
			poly := false
			for i, a := range args {
				if l, ok := looser[a]; ok && loose {
					args[i] = l
				}
				poly = poly || polyElem[a] || polyArray[a]
			}
			if !poly {
				out = append(out, [2][]string{args, {b.ret}})
				continue
			}
			for _, c := range concrete {
				sub := func(a string) string {
					switch {
					case polyElem[a]:
						return c
					case polyArray[a]:
						return c + "[]"
					}
					return a
				}
				concrete := make([]string, len(args))
				for i, a := range args {
					concrete[i] = sub(a)
				}
				out = append(out, [2][]string{concrete, {sub(b.ret)}})
			}
		}
	}
	return out
}

// plant creates, as plantedRole, an overload in public of every signature
// of each of names (builtin.overloads), each advancing the sequence
// public."called:<name>" when called, and returns how many it created (a
// signature PL/pgSQL cannot take is left out).
func plant(t *testing.T, dbURL string, names []string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, withSafePath(t, dbURL))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT p.proname::text, p.prokind = 'a',
		       coalesce((SELECT array_agg(format_type(a.t, NULL) ORDER BY a.n) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, n)), '{}'),
		       format_type(p.prorettype, NULL), p.proretset, p.provariadic <> 0
		FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind IN ('f', 'a') AND p.proname = ANY($1)`, names)
	if err != nil {
		t.Fatal(err)
	}
	var sigs []builtin
	for rows.Next() {
		var b builtin
		if err := rows.Scan(&b.name, &b.agg, &b.args, &b.ret, &b.set, &b.variadic); err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, n := range names {
		seq := pgx.Identifier{"public", "called:" + n}.Sanitize()
		stmts = append(stmts, "CREATE SEQUENCE "+seq, "GRANT USAGE ON SEQUENCE "+seq+" TO PUBLIC")
	}
	seen := map[string]bool{}
	for i, b := range sigs {
		fn := pgx.Identifier{"public", b.name}.Sanitize()
		record := fmt.Sprintf(`BEGIN
			PERFORM pg_catalog.nextval(%s::pg_catalog.regclass);
			RETURN%%s;
		EXCEPTION WHEN read_only_sql_transaction THEN
			RAISE EXCEPTION '%s%s was called';
		END`, quoteLiteral(pgx.Identifier{"public", "called:" + b.name}.Sanitize()), plantedMark, b.name)
		for j, o := range b.overloads() {
			args, ret := o[0], o[1][0]
			key := fmt.Sprintf("%s(%s)", b.name, strings.Join(args, ","))
			if seen[key] {
				continue
			}
			seen[key] = true
			if !b.agg {
				setof, value := "", " NULL"
				if b.set {
					setof, value = "SETOF ", ""
				} else if ret == "void" {
					value = ""
				}
				stmts = append(stmts, fmt.Sprintf("CREATE FUNCTION %s(%s) RETURNS %s%s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %s",
					fn, strings.Join(args, ", "), setof, ret, quoteLiteral(fmt.Sprintf(record, value))))
				continue
			}
			sfunc := pgx.Identifier{"public", fmt.Sprintf("planted_sfunc_%d_%d", i, j)}.Sanitize()
			aggArgs := strings.Join(args, ", ")
			if len(args) == 0 {
				aggArgs = "*"
			}
			stmts = append(stmts,
				fmt.Sprintf("CREATE FUNCTION %s(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS %s",
					sfunc, strings.Join(append([]string{ret}, args...), ", "), ret, quoteLiteral(fmt.Sprintf(record, " NULL"))),
				fmt.Sprintf("CREATE AGGREGATE %s(%s) (SFUNC = %s, STYPE = %s)", fn, aggArgs, sfunc, ret))
		}
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+plantedRole); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE FUNCTION pg_temp.plant(stmts text[]) RETURNS integer LANGUAGE plpgsql AS $$
		DECLARE s text; n integer := 0;
		BEGIN
			FOREACH s IN ARRAY stmts LOOP
				BEGIN
					EXECUTE s;
					n := n + 1;
				EXCEPTION WHEN others THEN NULL; -- a signature PL/pgSQL cannot take
				END;
			END LOOP;
			RETURN n;
		END $$`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT pg_temp.plant($1)`, stmts).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var seqs int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'S'`).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	if seqs != len(names) {
		t.Fatalf("%d of %d sequences planted", seqs, len(names))
	}
	return n - 2*len(names)
}

// withSafePath is dbURL with search_path pg_catalog, pg_temp: the test's
// own sessions, which the planted functions must not disturb.
func withSafePath(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "pg_catalog, pg_temp")
	u.RawQuery = q.Encode()
	return u.String()
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func asUser(t *testing.T, dbURL, user string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}
