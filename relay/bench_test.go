package relay

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/kafka/cloudevents"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
)

func benchRow() (*cdc.Relation, [][]byte) {
	rel := &cdc.Relation{Namespace: "outbox", Name: "events", Columns: []cdc.Column{
		{Name: "id", TypeOID: mapping.OIDUUID}, {Name: "topic", TypeOID: mapping.OIDText}, {Name: "key", TypeOID: mapping.OIDText},
		{Name: "payload", TypeOID: mapping.OIDJSONB}, {Name: "headers", TypeOID: mapping.OIDJSONB},
		{Name: "event_type", TypeOID: mapping.OIDText}, {Name: "created_at", TypeOID: mapping.OIDTimestamptz},
	}}
	payload := append([]byte{1}, []byte(`{"order_id": 123456, "note": "`+strings.Repeat("x", 440)+`"}`)...)
	ts := binary.BigEndian.AppendUint64(nil, 800000000000000)
	return rel, [][]byte{[]byte("0123456789abcdef"), []byte("orders"), []byte("customer-456"), payload,
		append([]byte{1}, []byte(`{"trace-id": "abc123"}`)...), []byte("order.created"), ts}
}

// BenchmarkBuildMessage: an outbox row to a Kafka message; as a
// CloudEvent in binary and structured mode (--cloudevents).
func BenchmarkBuildMessage(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchmarkBuild(b, nil) })
	for _, mode := range []cloudevents.Mode{cloudevents.Binary, cloudevents.Structured} {
		b.Run("cloudevents-"+string(mode), func(b *testing.B) {
			benchmarkBuild(b, newCEWriter(cloudevents.Config{Mode: mode}, "postgres://u@h/shop", nil))
		})
	}
}

func benchmarkBuild(b *testing.B, ce *ceWriter) {
	rel, values := benchRow()
	l, err := newLayout(rel, ce)
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
