package cdc

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// msg builds a pgoutput message from parts: byte, uint16, uint32, uint64,
// string (NUL-terminated) and []byte (raw).
func msg(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			b = append(b, v)
		case uint16:
			b = binary.BigEndian.AppendUint16(b, v)
		case uint32:
			b = binary.BigEndian.AppendUint32(b, v)
		case uint64:
			b = binary.BigEndian.AppendUint64(b, v)
		case string:
			b = append(append(b, v...), 0)
		case []byte:
			b = append(b, v...)
		default:
			panic("unsupported part")
		}
	}
	return b
}

func relationMsg() []byte {
	return msg(byte('R'), uint32(16384), "outbox", "events", byte('d'), uint16(3),
		byte(1), "id", uint32(2950), uint32(0xffffffff),
		byte(0), "topic", uint32(25), uint32(0xffffffff),
		byte(0), "key", uint32(25), uint32(0xffffffff))
}

func TestDecoder_BeginCarriesCommitLSNAndTime(t *testing.T) {
	t.Parallel()
	d := newDecoder()
	ch, ok, err := d.decode(msg(byte('B'), uint64(0x1234), uint64(1_000_000), uint32(7)))
	if err != nil || !ok {
		t.Fatalf("decode: ok=%v err=%v", ok, err)
	}
	if ch.Kind != KindBegin || ch.LSN != 0x1234 || !ch.Time.Equal(pgEpoch.Add(time.Second)) {
		t.Fatalf("got %+v", ch)
	}
}

func TestDecoder_CommitCarriesTheTransactionEndLSN(t *testing.T) {
	t.Parallel()
	d := newDecoder()
	ch, ok, err := d.decode(msg(byte('C'), byte(0), uint64(0x10), uint64(0x20), uint64(0)))
	if err != nil || !ok {
		t.Fatalf("decode: ok=%v err=%v", ok, err)
	}
	if ch.Kind != KindCommit || ch.LSN != pglogrepl.LSN(0x20) {
		t.Fatalf("got %+v, want commit at end LSN 0x20", ch)
	}
}

func TestDecoder_InsertValuesAreBinaryNullOrEmptyAndOwned(t *testing.T) {
	t.Parallel()
	d := newDecoder()
	if _, ok, err := d.decode(relationMsg()); ok || err != nil {
		t.Fatalf("relation: ok=%v err=%v, want cached silently", ok, err)
	}
	raw := msg(byte('I'), uint32(16384), byte('N'), uint16(3),
		byte('b'), uint32(16), []byte("0123456789abcdef"),
		byte('b'), uint32(0),
		byte('n'))
	ch, ok, err := d.decode(raw)
	if err != nil || !ok {
		t.Fatalf("decode: ok=%v err=%v", ok, err)
	}
	if ch.Relation.Name != "events" || ch.Relation.ColumnIndex("key") != 2 {
		t.Fatalf("relation %+v", ch.Relation)
	}
	if string(ch.Values[0]) != "0123456789abcdef" {
		t.Errorf("id = %q", ch.Values[0])
	}
	if ch.Values[1] == nil || len(ch.Values[1]) != 0 {
		t.Errorf("empty topic decoded as %#v, want empty and not NULL", ch.Values[1])
	}
	if ch.Values[2] != nil {
		t.Errorf("NULL key decoded as %#v, want nil", ch.Values[2])
	}
	raw[16] = 'X' // the receive buffer is reused: values must not share it
	if string(ch.Values[0]) != "0123456789abcdef" {
		t.Errorf("value changed with the source buffer: %q", ch.Values[0])
	}
}

func TestDecoder_InsertBeforeItsRelationIsAnError(t *testing.T) {
	t.Parallel()
	_, _, err := newDecoder().decode(msg(byte('I'), uint32(99), byte('N'), uint16(0)))
	if err == nil || !strings.Contains(err.Error(), "before its relation message") {
		t.Fatalf("err = %v", err)
	}
}

func TestDecoder_TruncatedMessagesAreErrorsNotPanics(t *testing.T) {
	t.Parallel()
	d := newDecoder()
	_, _, _ = d.decode(relationMsg())
	full := msg(byte('I'), uint32(16384), byte('N'), uint16(3),
		byte('b'), uint32(16), []byte("0123456789abcdef"), byte('n'), byte('n'))
	for n := 1; n < len(full); n++ {
		if _, _, err := d.decode(full[:n]); err == nil {
			t.Errorf("decoding the first %d bytes succeeded", n)
		}
	}
	for _, m := range [][]byte{relationMsg(), msg(byte('B'), uint64(1), uint64(2), uint32(3))} {
		for n := 1; n < len(m); n++ {
			if _, _, err := newDecoder().decode(m[:n]); err == nil {
				t.Errorf("decoding %q cut to %d bytes succeeded", m[0], n)
			}
		}
	}
}

func TestDecoder_OtherMessagesAreIgnored(t *testing.T) {
	t.Parallel()
	for _, typ := range []byte{'Y', 'O', 'U', 'D', 'T', 'M'} {
		if _, ok, err := newDecoder().decode([]byte{typ, 0, 0, 0}); ok || err != nil {
			t.Errorf("%q: ok=%v err=%v, want ignored", typ, ok, err)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add(relationMsg())
	f.Add(msg(byte('I'), uint32(16384), byte('N'), uint16(1), byte('b'), uint32(2), []byte("hi")))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder()
		_, _, _ = d.decode(relationMsg())
		_, _, _ = d.decode(data) // must not panic
	})
}

// eventsInsert is an outbox row as pgoutput sends it: 7 binary columns,
// a ~500-byte jsonb payload.
func eventsInsert() (rel, ins []byte) {
	rel = msg(byte('R'), uint32(1), "outbox", "events", byte('d'), uint16(7),
		byte(1), "id", uint32(2950), uint32(0xffffffff), byte(0), "topic", uint32(25), uint32(0xffffffff),
		byte(0), "key", uint32(25), uint32(0xffffffff), byte(0), "payload", uint32(3802), uint32(0xffffffff),
		byte(0), "headers", uint32(3802), uint32(0xffffffff), byte(0), "event_type", uint32(25), uint32(0xffffffff),
		byte(0), "created_at", uint32(1184), uint32(0xffffffff))
	payload := append([]byte{1}, []byte(`{"order_id": 123456, "customer": "customer-456", "note": "`+strings.Repeat("x", 420)+`"}`)...)
	ins = msg(byte('I'), uint32(1), byte('N'), uint16(7),
		byte('b'), uint32(16), []byte("0123456789abcdef"),
		byte('b'), uint32(6), []byte("orders"),
		byte('b'), uint32(12), []byte("customer-456"),
		byte('b'), uint32(len(payload)), payload,
		byte('n'),
		byte('b'), uint32(13), []byte("order.created"),
		byte('b'), uint32(8), uint64(800000000000000))
	return rel, ins
}

func BenchmarkDecodeInsert(b *testing.B) {
	rel, ins := eventsInsert()
	d := newDecoder()
	if _, _, err := d.decode(rel); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(ins)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.decode(ins); err != nil {
			b.Fatal(err)
		}
	}
}

// Messages the relay did not ask for (streaming of in-progress
// transactions, two-phase commit, origins, types, logical messages,
// truncates, and any a newer server adds) pass without a change and
// without an error, and the next insert decodes as before.
func TestDecoder_MessagesTheRelayDidNotAskForAreSkipped(t *testing.T) {
	t.Parallel()
	unasked := map[string][]byte{
		"StreamAbort (16+, with LSN and time)": msg(byte('A'), uint32(7), uint32(7), uint64(0x30), uint64(1)),
		"StreamAbort (14, 15)":                 msg(byte('A'), uint32(7), uint32(8)),
		"StreamStart":                          msg(byte('S'), uint32(7), byte(1)),
		"StreamStop":                           msg(byte('E')),
		"StreamCommit":                         msg(byte('c'), uint32(7), byte(0), uint64(0x10), uint64(0x20), uint64(1)),
		"Origin":                               msg(byte('O'), uint64(0x10), "node_a"),
		"Type":                                 msg(byte('Y'), uint32(16400), "public", "mood"),
		"LogicalMessage":                       msg(byte('M'), byte(1), uint64(0x10), "prefix", uint32(2), []byte("hi")),
		"Truncate":                             msg(byte('T'), uint32(1), byte(0), uint32(16384)),
		"BeginPrepare":                         msg(byte('b'), uint64(0x10), uint64(0x20), uint64(1), uint32(7), "gid"),
		"Unknown":                              msg(byte('~'), uint64(42)),
	}
	for name, raw := range unasked {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := newDecoder()
			if _, _, err := d.decode(relationMsg()); err != nil {
				t.Fatal(err)
			}
			if ch, ok, err := d.decode(raw); ok || err != nil {
				t.Fatalf("got %+v ok=%v err=%v; want it skipped without an error", ch, ok, err)
			}
			ch, ok, err := d.decode(msg(byte('I'), uint32(16384), byte('N'), uint16(3),
				byte('b'), uint32(1), []byte("x"), byte('b'), uint32(1), []byte("t"), byte('n')))
			if err != nil || !ok || ch.Kind != KindInsert || string(ch.Values[1]) != "t" {
				t.Fatalf("the insert after it: %+v ok=%v err=%v", ch, ok, err)
			}
		})
	}
}

// PostgreSQL's timestamps run from 4714-11-24 BC to 294276-12-31 AD
// (MIN_TIMESTAMP and END_TIMESTAMP in its datatype/timestamp.h), far
// past the 292 years a time.Duration holds around 2000.
func TestPgTime_DecodesEveryTimestampPostgreSQLStoresWithoutOverflow(t *testing.T) {
	cases := []struct {
		micros int64
		want   time.Time
	}{
		{0, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{-1, time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{-960867740000000, time.Date(1969, 7, 20, 20, 17, 40, 0, time.UTC)},
		// 10000-01-01: the value the issue saw sent as 1816-03-30.
		{252455616000000000, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{-211813488000000000, time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)},                           // 4714-11-24 BC
		{9223371331200000000 - 1, time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Microsecond)}, // 294276-12-31 23:59:59.999999
	}
	for _, c := range cases {
		if got := PgTime(c.micros); !got.Equal(c.want) {
			t.Errorf("PgTime(%d) = %v, want %v", c.micros, got, c.want)
		}
		if got, err := Timestamp(c.micros); err != nil || !got.Equal(c.want) {
			t.Errorf("Timestamp(%d) = %v, %v; want %v", c.micros, got, err, c.want)
		}
	}
	for _, inf := range []int64{math.MaxInt64, math.MinInt64} {
		if _, err := Timestamp(inf); !errors.Is(err, ErrInfiniteTime) {
			t.Errorf("Timestamp(%d): %v, want ErrInfiniteTime", inf, err)
		}
	}
}
