package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// debeziumConnector is the configuration the Debezium phase's relay reads:
// Debezium's outbox example, routed to the bench topic.
const debeziumConnector = `{"name": "bench-outbox", "config": {
	"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
	"table.include.list": "public.bench_outboxevent",
	"transforms": "outbox",
	"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
	"transforms.outbox.route.topic.replacement": "${routedByValue}",
	"transforms.outbox.table.fields.additional.placement": "type:header:eventType",
	"key.converter": "org.apache.kafka.connect.storage.StringConverter",
	"value.converter": "org.apache.kafka.connect.json.JsonConverter",
	"value.converter.schemas.enable": "false"}}`

// prepareDebezium creates the Debezium-shaped table (Debezium's
// documentation's) in the relay's publication, once.
func (b *bench) prepareDebezium(ctx context.Context) error {
	return b.exec(ctx, `DO $$ BEGIN
		CREATE TABLE IF NOT EXISTS public.bench_outboxevent (
			id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
			type varchar(255) NOT NULL, payload jsonb);
		IF NOT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = 'outbox_relay' AND tablename = 'bench_outboxevent') THEN
			ALTER PUBLICATION outbox_relay ADD TABLE public.bench_outboxevent;
		END IF;
	END $$`)
}

// debeziumDrain: the relay, given a Debezium connector's configuration,
// drains n events of a Debezium-shaped table from a fresh slot; each
// transaction of 1,000 deletes its rows before it commits (Debezium's
// recommended pattern). The payloads are the outbox.events drain's.
func (b *bench) debeziumDrain(ctx context.Context, n int, decodeRate, drainRate float64) (Result, error) {
	if err := b.prepareDebezium(ctx); err != nil {
		return Result{}, err
	}
	const slot = "bench_debezium"
	b.dropSlot(ctx, slot)
	if err := b.exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(os.Stderr, "inserting %d Debezium-shaped events (1,000 per transaction, deleted before commit)\n", n)
	for done := 0; done < n; done += 1000 {
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO public.bench_outboxevent (id, aggregatetype, aggregateid, type, payload)
				SELECT gen_random_uuid(), $1, 'customer-' || ((s + $2) % 1000), 'order.created',
				       jsonb_build_object('order_id', s + $2, 'customer', 'customer-' || ((s + $2) % 1000),
				                          'amount', round((random() * 1000)::numeric, 2), 'currency', 'EUR',
				                          'note', repeat('x', 380))
				FROM generate_series(1, $3) AS s`, b.o.topic, done, min(1000, n-done)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM public.bench_outboxevent`)
			return err
		})
		if err != nil {
			return Result{}, fmt.Errorf("inserting Debezium-shaped events: %w", err)
		}
	}
	end, err := b.lsn(ctx)
	if err != nil {
		return Result{}, err
	}
	if err := b.trimTopic(ctx); err != nil {
		return Result{}, err
	}
	dir, err := os.MkdirTemp("", "outbox-bench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "connector.json")
	if err := os.WriteFile(file, []byte(debeziumConnector), 0o600); err != nil {
		return Result{}, err
	}
	fmt.Fprintln(os.Stderr, "relay drain of the Debezium-shaped table")
	t0, broker0 := time.Now(), b.brokerCPU()
	r, err := b.startRelay("--slot", slot, "--debezium-config", file)
	if err != nil {
		return Result{}, err
	}
	secs, rss, cpu, err := b.untilConfirmed(ctx, r, slot, end, t0, 10*time.Minute)
	if err != nil {
		return Result{}, err
	}
	broker := b.brokerCPU() - broker0
	var sent int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox.deliveries
		WHERE source = 'public.bench_outboxevent' AND status = 'SENT'`).Scan(&sent); err != nil || sent != n {
		return Result{}, fmt.Errorf("Debezium drain: %d SENT rows, want %d (%v)", sent, n, err)
	}
	b.dropSlot(ctx, slot)
	if err := b.exec(ctx, `DELETE FROM outbox.mapped_events WHERE source = 'public.bench_outboxevent';
		DELETE FROM outbox.deliveries WHERE source = 'public.bench_outboxevent'`); err != nil {
		return Result{}, err
	}
	return Result{Phase: "Debezium-shaped drain", Events: n, Seconds: secs, EventsPerS: float64(n) / secs,
		VsDecode: float64(n) / secs / decodeRate, VsDrain: float64(n) / secs / drainRate, RSSMiB: rss, CPUSeconds: cpu,
		CPUPerEvent: perEvent(cpu, n), BrokerCPU: broker,
		Description: "the relay, given a Debezium connector's JSON, drains as many events of Debezium's outbox table, each row deleted in its transaction"}, nil
}
