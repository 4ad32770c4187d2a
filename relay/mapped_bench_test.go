package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/internal/mapping"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// BenchmarkMappedFill measures the stream's work per event of a
// Debezium-shaped table: the record and its kept copy.
func BenchmarkMappedFill(b *testing.B) {
	d, err := mapping.LoadDebezium("../internal/mapping/testdata/outbox-connector.json")
	if err != nil {
		b.Fatal(err)
	}
	rel := &cdc.Relation{Namespace: "public", Name: "outboxevent", Columns: []cdc.Column{
		{Name: "id", TypeOID: mapping.OIDUUID}, {Name: "aggregatetype", TypeOID: mapping.OIDVarchar}, {Name: "aggregateid", TypeOID: mapping.OIDVarchar},
		{Name: "type", TypeOID: mapping.OIDVarchar}, {Name: "payload", TypeOID: mapping.OIDJSONB}}}
	bound, err := d.Tables[0].Bind(rel)
	if err != nil {
		b.Fatal(err)
	}
	l := &mappedLayout{source: "public.outboxevent", bound: bound, table: d.Tables[0]}
	payload := append([]byte{1}, []byte(`{"note": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "amount": 12.5, "currency": "EUR", "customer": "customer-1", "order_id": 1}`)...)
	id := make([]byte, 16)
	values := [][]byte{id, []byte("bench"), []byte("customer-1"), []byte("order.created"), payload}
	out := &store.Outcomes{}
	now := time.Now()
	batch := make([]event, 1000) // as the stream's batches hold them
	b.ReportAllocs()
	for i := range b.N {
		binary.BigEndian.PutUint64(id, uint64(i))
		e := &batch[i%len(batch)]
		*e = event{}
		l.fill(e, values, now)
		if e.invalid != "" {
			b.Fatal(e.invalid)
		}
		if i%1000 == 0 {
			out.Reset()
		}
		out.AddMapped(store.Outcome{EventID: e.id, Status: store.StatusSent}, e.copy)
	}
}
