package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// debeziumConnector is a connector configuration as teams post it to Kafka
// Connect, for the table of Debezium's documentation.
const debeziumConnector = `{"name": "outbox-connector", "config": {
	"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
	"plugin.name": "pgoutput",
	"table.include.list": "public.outboxevent",
	"transforms": "outbox",
	"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
	"transforms.outbox.table.fields.additional.placement": "type:header:eventType",
	"key.converter": "org.apache.kafka.connect.storage.StringConverter",
	"value.converter": "org.apache.kafka.connect.json.JsonConverter",
	"value.converter.schemas.enable": "false"}}`

// deletingWriter writes Debezium-shaped events in transactions of 1 to 50,
// each deleting its rows before it commits (Debezium's recommended
// pattern) and logging their ids in written_ids, until stop is closed or
// max events are written; it returns how many it committed.
func deletingWriter(t *testing.T, e *env, stop <-chan struct{}, max int) <-chan int {
	return transactions(t, e, stop, max, 50, func(n int) string {
		return fmt.Sprintf(`BEGIN;
			WITH ins AS (INSERT INTO public.outboxevent (id, aggregatetype, aggregateid, type, payload)
				SELECT gen_random_uuid(), 'orders', 'k' || (s %% 50), 'OrderCreated', jsonb_build_object('s', s)
				FROM generate_series(1, %d) AS s RETURNING id)
			INSERT INTO written_ids SELECT id FROM ins;
			DELETE FROM public.outboxevent;
			COMMIT`, n)
	})
}

func TestCrash_SIGKILLWhileRelayingADebeziumTableWhoseRowsAreDeletedLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "outbox.event.orders:3")
	if _, err := e.pool.Exec(context.Background(), `
		CREATE TABLE public.outboxevent (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);
		CREATE TABLE written_ids (id uuid PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "connector.json")
	if err := os.WriteFile(file, []byte(debeziumConnector), 0o600); err != nil {
		t.Fatal(err)
	}
	// As a team does: migrate (as the schema's owner) publishes the table
	// and grants the relay's role; the relay runs with least privilege.
	if out, code := runBin(t, "outbox-relay", []string{"migrate", "--debezium-config", file}, "OUTBOX_DATABASE_URL="+e.dbURL); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, out)
	}
	stop := make(chan struct{})
	relayProc := e.relay(t, "--debezium-config", file)
	written := deletingWriter(t, e, stop, 10000)
	const kills = 4
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		relayProc.signal(t, syscall.SIGKILL)
		relayProc.wait(t, 10*time.Second)
		relayProc = e.relay(t, "--debezium-config", file)
	}
	close(stop)
	total := <-written
	pgtest.Eventually(t, 120*time.Second, "every event SENT", func() (bool, string) {
		n := e.count(t, `SELECT count(*) FROM written_ids w JOIN outbox.deliveries d
			ON d.event_id = outbox.event_id('public.outboxevent', w.id::text) WHERE d.status = 'SENT'`)
		return n == total, fmt.Sprintf("%d of %d SENT", n, total)
	})
	recs := kafkatest.Consume(t, []string{e.brokers}, total, 60*time.Second, "outbox.event.orders")
	seen := map[string]int{}
	for _, r := range recs {
		for _, h := range r.Headers {
			if h.Key == "id" {
				seen[string(h.Value)]++
			}
		}
	}
	rows, err := e.pool.Query(context.Background(), `SELECT id::text FROM written_ids`)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		if seen[id] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d events are not on Kafka", missing, total)
	}
	report(t, "%d Debezium-shaped events, each row deleted in its transaction, relay SIGKILLed %d times: 0 lost, %d duplicates on Kafka",
		total, kills, len(recs)-len(seen))
}
