package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/kafkatest"
	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

func TestTwoPollingProcesses_NeverClaimTheSameRowAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "orders:3")
	const n = 5000
	for _, sql := range []string{
		`CREATE TABLE claims (event_id uuid, instance text)`, `GRANT INSERT ON claims TO outbox_relay`, // the trigger runs as the relay
		`CREATE FUNCTION note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
		   IF NEW.status = 'PROCESSING' AND OLD.status <> 'PROCESSING' THEN
		     INSERT INTO public.claims VALUES (NEW.event_id, NEW.locked_by); -- the relay runs it with search_path pg_catalog, pg_temp
		   END IF;
		   RETURN NEW;
		 END $$`,
		`CREATE TRIGGER note_claim BEFORE UPDATE ON outbox.deliveries FOR EACH ROW EXECUTE FUNCTION note_claim()`,
		// Events an operator asked to resend: PENDING rows, due now.
		fmt.Sprintf(`WITH ev AS (INSERT INTO outbox.events (topic, key, payload)
			SELECT 'orders', 'k' || (s %% 10), jsonb_build_object('s', s) FROM generate_series(1, %d) s RETURNING id)
			INSERT INTO outbox.deliveries (event_id, status) SELECT id, 'PENDING' FROM ev`, n),
	} {
		if _, err := e.pool.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"poller-a", "poller-b"} {
		start(t, "outbox-relay", []string{"run", "--mode", "poll", "--instance-id", name, "--poll-batch-size", "200"},
			"OUTBOX_DATABASE_URL="+pgtest.RelayURL(e.dbURL), "OUTBOX_KAFKA_BROKERS="+e.brokers)
	}
	pgtest.Eventually(t, 60*time.Second, "every event SENT", func() (bool, string) {
		got := e.count(t, `SELECT count(*) FROM outbox.deliveries WHERE status = 'SENT'`)
		return got == n, fmt.Sprintf("%d of %d SENT", got, n)
	})
	twice := e.count(t, `SELECT count(*) FROM (SELECT event_id FROM claims GROUP BY 1 HAVING count(*) > 1) x`)
	instances := e.count(t, `SELECT count(DISTINCT instance) FROM claims`)
	recs := kafkatest.Consume(t, []string{e.brokers}, n, 30*time.Second, "orders")
	report(t, "%d events polled by 2 processes (%d took part): %d claimed twice, %d records on Kafka", n, instances, twice, len(recs))
	if twice != 0 || len(recs) != n {
		t.Fatalf("%d events claimed twice and %d records on Kafka; want 0 and %d", twice, len(recs), n)
	}
}
