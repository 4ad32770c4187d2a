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
	execSQL(t, pool, `CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb)`)
	file := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list": "public.outboxevent", "transforms": "outbox",
		"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}`)
	run := cli(context.Background(), dbURL)
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
