package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun_ADebeziumConfigWithUnsupportedOptionsExits2NamingEachOne(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "connector.json", `{"name": "c", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": "127.0.0.1", "database.port": "1", "database.user": "dbz",
		"database.password": "connector-secret-pw", "database.dbname": "orders",
		"table.include.list": "public.outboxevent",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "shard:footer",
		"value.converter": "io.confluent.connect.avro.AvroConverter"}}`)
	out, errOut, code := runCLI(t, env("OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092"), "run", "--debezium-config", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"transforms.outbox.table.fields.additional.placement", "shard:footer", "value.converter:", "AvroConverter"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not name %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "connector-secret-pw") {
		t.Errorf("the connector's password reached the output:\n%s%s", out, errOut)
	}
}

func TestRun_TheDebeziumConfigsDatabaseSettingsStandInForDatabaseURLAndStaySecret(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.Migrated(t)
	u, _ := url.Parse(dbURL)
	file := writeFile(t, "connector.properties", strings.Join([]string{
		"connector.class=io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname=" + u.Hostname(), "database.port=" + u.Port(), "database.user=" + u.User.Username(),
		"database.password=connector-secret-pw", "database.dbname=" + strings.TrimPrefix(u.Path, "/"),
		"table.include.list=public.missing_outbox",
		"transforms=outbox", "transforms.outbox.type=io.debezium.transforms.outbox.EventRouter",
	}, "\n"))
	// The table does not exist: the relay connects with the file's
	// settings, then stops at its check of the mapping.
	out, errOut, code := runCLI(t, env("OUTBOX_KAFKA_BROKERS", "127.0.0.1:9", "OUTBOX_SLOT", uniqueSlot(t)), "run", "--metrics-addr", "", "--debezium-config", file)
	if code != 2 || !strings.Contains(errOut, "table public.missing_outbox does not exist") {
		t.Fatalf("exit %d, want 2 naming the missing table\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "connector-secret-pw") {
		t.Errorf("the connector's password reached the output:\n%s%s", out, errOut)
	}
	// migrate connects with the same settings, and stops at the table.
	mout, merr, mcode := runCLI(t, env(), "migrate", "--debezium-config", file)
	if mcode != 2 || !strings.Contains(merr, `relation "public.missing_outbox" does not exist`) ||
		strings.Contains(mout+merr, "connector-secret-pw") {
		t.Errorf("migrate with the file's database settings: exit %d\n%s%s", mcode, mout, merr)
	}
}

func TestMigrate_AddsMappedTablesToThePublicationAndPrintsTheStatement(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	pgtest.Exec(t, pool, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb)`)
	file := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`)
	run := cliAs(context.Background(), dbURL)
	for range 2 { // idempotent
		if out, errOut, code := run("migrate", "--debezium-config", file); code != 0 || !strings.Contains(out, "mapped table public.outboxevent is in publication outbox_relay") {
			t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_publication_tables WHERE pubname = 'outbox_relay' AND tablename = 'outboxevent'`); n != 1 {
		t.Fatalf("table in the publication %d times", n)
	}
	out, _, code := runCLI(t, env(), "migrate", "--print", "--debezium-config", file)
	if code != 0 || !strings.Contains(out, `ALTER PUBLICATION "outbox_relay" ADD TABLE "public"."outboxevent"`) {
		t.Fatalf("migrate --print: exit %d\n%s", code, out)
	}
}

func TestMigrate_GivesAMappedTableItsOrderColumnsWithoutRewritingIt(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	u, _ := url.Parse(dbURL)
	writer := "writer_" + strings.TrimPrefix(u.Path, "/outbox_test_")
	pgtest.Exec(t, pool, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb);
		INSERT INTO public.outboxevent SELECT gen_random_uuid(), 'order', 'o-1', '{}' FROM generate_series(1, 1000);
		CREATE ROLE `+writer+`;
		GRANT USAGE ON SCHEMA public TO `+writer+`;
		GRANT INSERT ON public.outboxevent TO `+writer)
	t.Cleanup(func() {
		pgtest.Exec(t, pool, `DROP TABLE public.outboxevent; DROP OWNED BY `+writer+`; DROP ROLE `+writer)
	})
	file := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`)
	relfile := func() int {
		return pgtest.Count(t, pool, `SELECT pg_relation_filenode('public.outboxevent')::int8`)
	}
	before := relfile()
	run := cliAs(context.Background(), dbURL)
	for range 2 { // idempotent
		if out, errOut, code := run("migrate", "--debezium-config", file); code != 0 ||
			!strings.Contains(out, "mapped table public.outboxevent has its order columns outbox_created_at, outbox_seq") {
			t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
		}
	}
	if after := relfile(); after != before {
		t.Errorf("the table was rewritten: filenode %d, then %d", before, after)
	}
	// Rows from before have no insertion order (taken as relayed before);
	// the application's role inserts as it did, and its rows get one.
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM public.outboxevent WHERE outbox_seq IS NULL AND outbox_created_at IS NOT NULL`); n != 1000 {
		t.Errorf("%d rows from before without outbox_seq, want 1000", n)
	}
	pgtest.Exec(t, pool, `SET ROLE `+writer+`;
		INSERT INTO public.outboxevent (id, aggregatetype, aggregateid, payload) VALUES (gen_random_uuid(), 'order', 'o-2', '{}');
		RESET ROLE`)
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM public.outboxevent WHERE outbox_seq IS NOT NULL`); n != 1 {
		t.Errorf("%d new rows with an outbox_seq, want 1", n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_indexes WHERE tablename = 'outboxevent' AND indexdef LIKE '%(outbox_created_at, outbox_seq)%'`); n != 1 {
		t.Errorf("%d indexes on the order columns, want 1", n)
	}
	out, _, code := runCLI(t, env(), "migrate", "--print", "--debezium-config", file)
	for _, want := range []string{
		`ALTER TABLE "public"."outboxevent" ADD COLUMN IF NOT EXISTS outbox_created_at timestamptz NOT NULL DEFAULT now();`,
		`SET search_path = pg_catalog, pg_temp;`, // as migrate's own connection has it
		`ALTER TABLE "public"."outboxevent" ALTER COLUMN outbox_seq SET DEFAULT pg_catalog.nextval('"public"."outboxevent_outbox_seq"'::pg_catalog.regclass);`,
		`CREATE INDEX CONCURRENTLY IF NOT EXISTS "outboxevent_outbox_order_idx" ON "public"."outboxevent" (outbox_created_at, outbox_seq);`,
		`GRANT SELECT ON "public"."outboxevent" TO outbox_relay;`, // the roles, for teams that manage them
		`ARRAY['outbox_writer', 'outbox_operator', 'outbox_relay']`, `GRANT USAGE ON SEQUENCE outbox.events_seq_seq TO outbox_writer;`,
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("migrate --print: exit %d, lacks %s\n%s", code, want, out)
		}
	}
}

func TestSecrets_TheDatabaseURLAndSASLPasswordCanComeFromFiles(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.Migrated(t)
	urlFile := writeFile(t, "db-url", dbURL+"\n")
	// Every command reads it: an operator command, and migrate.
	for _, args := range [][]string{{"status"}, {"migrate"}} {
		out, errOut, code := runCLI(t, env("OUTBOX_DATABASE_URL_FILE", urlFile), args...)
		if code != 0 {
			t.Errorf("%v with OUTBOX_DATABASE_URL_FILE: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// Given twice is a usage error that shows neither.
	pw := writeFile(t, "sasl", "hunter2\n")
	_, errOut, code := runCLI(t, env("OUTBOX_DATABASE_URL", dbURL, "OUTBOX_KAFKA_BROKERS", "127.0.0.1:1",
		"OUTBOX_KAFKA_SASL_PASSWORD", "hunter2"), "run", "--kafka-sasl-password-file", pw)
	if code != 64 || !strings.Contains(errOut, "--kafka-sasl-password and --kafka-sasl-password-file are both given") ||
		strings.Contains(errOut, "hunter2") {
		t.Errorf("a password given twice: exit %d\n%s", code, errOut)
	}
}

func TestMigrate_ADebeziumConfigBeforeTheFirstRunCreatesThePublicationItNames(t *testing.T) {
	t.Parallel()
	dbURL, pool := pgtest.Migrated(t)
	u, _ := url.Parse(dbURL)
	pub := "pub_" + strings.TrimPrefix(u.Path, "/outbox_test_") // publications are per database; a name of its own all the same
	pgtest.Exec(t, pool, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb)`)
	file := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`)
	run := cliAs(context.Background(), dbURL)
	for range 2 { // idempotent
		if out, errOut, code := run("migrate", "--debezium-config", file, "--publication", pub); code != 0 {
			t.Fatalf("migrate before the first run: exit %d\n%s%s", code, out, errOut)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_publication_tables WHERE pubname = $1
		AND (schemaname, tablename) IN (('public', 'outboxevent'), ('outbox', 'events'))`, pub); n != 2 {
		t.Fatalf("publication %s holds %d of outbox.events and public.outboxevent, want both", pub, n)
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_publication WHERE pubname = $1 AND pubinsert AND NOT pubupdate`, pub); n != 1 {
		t.Fatalf("publication %s does not publish inserts only", pub)
	}
}

// The worker's converters apply where the connector names none: a worker
// whose value converter the relay cannot write stops run at start, named,
// and so does its env var.
func TestRun_TheDebeziumWorkerConfigsConvertersApplyWhereTheConnectorNamesNone(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": "127.0.0.1", "database.port": "1", "database.dbname": "orders",
		"table.include.list": "public.outboxevent", "topic.prefix": "app",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`)
	worker := writeFile(t, "connect-distributed.properties", "bootstrap.servers=kafka:9092\n"+
		"key.converter=org.apache.kafka.connect.storage.StringConverter\n"+
		"value.converter=io.confluent.connect.avro.AvroConverter\n"+
		"value.converter.schema.registry.url=http://registry:8081\n")
	for _, args := range [][]string{
		{"run", "--debezium-config", file, "--debezium-worker-config", worker},
		{"run", "--debezium-config", file},
	} {
		e := env("OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092")
		if len(args) == 3 {
			e = env("OUTBOX_KAFKA_BROKERS", "127.0.0.1:9092", "OUTBOX_DEBEZIUM_WORKER_CONFIG", worker)
		}
		out, errOut, code := runCLI(t, e, args...)
		if code != 2 || !strings.Contains(errOut, "value.converter:") || !strings.Contains(errOut, "AvroConverter") {
			t.Errorf("%v: exit %d, want 2 naming the worker's value.converter\n%s%s", args, code, out, errOut)
		}
	}
}
