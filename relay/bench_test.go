package relay

import (
	"context"
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func benchRow() (*cdc.Relation, [][]byte) {
	rel := &cdc.Relation{Namespace: "outbox", Name: "events", Columns: []cdc.Column{
		{Name: "id", TypeOID: oidUUID}, {Name: "topic", TypeOID: oidText}, {Name: "key", TypeOID: oidText},
		{Name: "payload", TypeOID: oidJSONB}, {Name: "headers", TypeOID: oidJSONB},
		{Name: "event_type", TypeOID: oidText}, {Name: "created_at", TypeOID: oidTimestamptz},
	}}
	payload := append([]byte{1}, []byte(`{"order_id": 123456, "note": "`+strings.Repeat("x", 440)+`"}`)...)
	ts := binary.BigEndian.AppendUint64(nil, 800000000000000)
	return rel, [][]byte{[]byte("0123456789abcdef"), []byte("orders"), []byte("customer-456"), payload,
		append([]byte{1}, []byte(`{"trace-id": "abc123"}`)...), []byte("order.created"), ts}
}

// BenchmarkBuildMessage: an outbox row to a Kafka message.
func BenchmarkBuildMessage(b *testing.B) {
	rel, values := benchRow()
	l, err := newLayout(rel)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	var e event
	for b.Loop() {
		e = event{}
		l.fill(&e, values, now)
		if e.invalid != "" {
			b.Fatal(e.invalid)
		}
	}
}

// BenchmarkWriteStatusBatch: one status statement for 1,000 SENT events.
// Needs TEST_DATABASE_URL (scripts/test.sh sets it).
func BenchmarkWriteStatusBatch(b *testing.B) {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	// A schema of its own would clash with outbox: use a scratch database.
	if _, err := pool.Exec(ctx, `DROP DATABASE IF EXISTS outbox_bench_status WITH (FORCE)`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE DATABASE outbox_bench_status`); err != nil {
		b.Fatal(err)
	}
	cfg, _ := pgxpool.ParseConfig(url)
	cfg.ConnConfig.Database = "outbox_bench_status"
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db); err != nil {
		b.Fatal(err)
	}
	const n = 1000
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		rows := &statusRows{policy: []byte(`{}`)}
		var ids [][16]byte
		if err := func() error {
			r, err := db.Query(ctx, `INSERT INTO outbox.events (topic, payload) SELECT 't', '{}' FROM generate_series(1, $1) RETURNING id`, n)
			if err != nil {
				return err
			}
			defer r.Close()
			for r.Next() {
				var id [16]byte
				if err := r.Scan(&id); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return r.Err()
		}(); err != nil {
			b.Fatal(err)
		}
		for i, id := range ids {
			rows.add(&event{id: id, res: result{status: StatusSent, attempts: 1, partition: 0, offset: int64(i)}}, 5)
		}
		b.StartTimer()
		if visible, err := rows.write(ctx, db); err != nil || visible != n {
			b.Fatalf("wrote %d of %d rows: %v", visible, n, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
