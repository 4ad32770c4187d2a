package cdc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pglogrepl"
)

// Kind says what a Change is.
type Kind uint8

const (
	// KindBegin opens a transaction; LSN is its commit LSN.
	KindBegin Kind = iota + 1
	// KindInsert is one inserted row of a published table.
	KindInsert
	// KindCommit closes a transaction; LSN is the end of its commit record,
	// the position to confirm once all its rows are handled.
	KindCommit
)

// Change is one decoded pgoutput message the relay acts on.
type Change struct {
	Kind Kind
	// LSN is the commit LSN (Begin) or the transaction's end LSN (Commit).
	LSN pglogrepl.LSN
	// Time is the commit time (Begin, Commit).
	Time time.Time
	// Relation describes Values (Insert).
	Relation *Relation
	// Values holds one entry per relation column in binary send format; a nil
	// entry is SQL NULL. The slices are owned by the Change.
	Values [][]byte
}

// Relation is a published table as pgoutput last described it.
type Relation struct {
	ID        uint32
	Namespace string
	Name      string
	Columns   []Column
}

// Column is one column of a Relation.
type Column struct {
	Name    string
	TypeOID uint32
}

// ColumnIndex returns the position of the named column, or -1.
func (r *Relation) ColumnIndex(name string) int {
	for i, c := range r.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// errShort reports a pgoutput message cut short.
var errShort = errors.New("pgoutput message too short")

// pgEpoch is the zero of PostgreSQL timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// PostgreSQL's infinite timestamps: the largest and the smallest int64.
const (
	pgInfinity    = math.MaxInt64
	pgNegInfinity = math.MinInt64
)

// ErrInfiniteTime says a timestamp is infinity or -infinity, which no
// time.Time holds.
var ErrInfiniteTime = errors.New("an infinite timestamp")

// PgTime converts microseconds since 2000-01-01 UTC, PostgreSQL's timestamp
// representation, to a time.Time (UTC). Every value converts without
// overflow, PostgreSQL's whole range (4713 BC to 294276 AD) included:
// seconds and microseconds are added apart, never as one time.Duration
// (which ends about 292 years from 2000). infinity and -infinity come out
// as the int64's own distance from 2000; Timestamp says they are infinite.
func PgTime(micros int64) time.Time {
	sec, us := micros/1e6, micros%1e6
	if us < 0 {
		sec, us = sec-1, us+1e6
	}
	return time.Unix(pgEpochUnix+sec, us*1e3).UTC()
}

// pgEpochUnix is pgEpoch in seconds since 1970.
const pgEpochUnix = 946684800

// Timestamp decodes a timestamptz or timestamp in PostgreSQL's binary form
// (microseconds since 2000-01-01, a timestamp without time zone read as
// UTC): the time, or ErrInfiniteTime for infinity and -infinity.
func Timestamp(micros int64) (time.Time, error) {
	if micros == pgInfinity || micros == pgNegInfinity {
		return time.Time{}, ErrInfiniteTime
	}
	return PgTime(micros), nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) n(k int) []byte {
	if r.err != nil || len(r.b) < k {
		r.err = errShort
		return nil
	}
	v := r.b[:k:k]
	r.b = r.b[k:]
	return v
}

func (r *reader) u8() byte {
	if v := r.n(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.n(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.n(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.n(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	for i, c := range r.b {
		if c == 0 {
			s := string(r.b[:i])
			r.b = r.b[i+1:]
			return s
		}
	}
	r.err = errShort
	return ""
}

// decoder turns pgoutput (protocol version 1) messages into Changes, keeping
// the relation cache that Insert messages refer to.
type decoder struct {
	relations map[uint32]*Relation
}

func newDecoder() *decoder {
	return &decoder{relations: map[uint32]*Relation{}}
}

// decode decodes one pgoutput message. It returns ok=false for messages the
// relay does not act on (relation, type, origin, update, delete, truncate,
// logical messages). data is not retained: Insert values are copied.
func (d *decoder) decode(data []byte) (ch Change, ok bool, err error) {
	if len(data) == 0 {
		return ch, false, errShort
	}
	r := &reader{b: data[1:]}
	switch data[0] {
	case 'B':
		ch.Kind = KindBegin
		ch.LSN = pglogrepl.LSN(r.u64())
		ch.Time = PgTime(int64(r.u64()))
		r.u32() // xid
		ok = true
	case 'C':
		r.u8()  // flags
		r.u64() // commit LSN
		ch.Kind = KindCommit
		ch.LSN = pglogrepl.LSN(r.u64())
		ch.Time = PgTime(int64(r.u64()))
		ok = true
	case 'R':
		rel := &Relation{ID: r.u32(), Namespace: r.str(), Name: r.str()}
		r.u8() // replica identity
		n := int(r.u16())
		if r.err == nil {
			rel.Columns = make([]Column, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			r.u8() // flags
			c := Column{Name: r.str(), TypeOID: r.u32()}
			r.u32() // type modifier
			rel.Columns = append(rel.Columns, c)
		}
		if r.err == nil {
			d.relations[rel.ID] = rel
		}
	case 'I':
		relID := r.u32()
		if kind := r.u8(); r.err == nil && kind != 'N' {
			return ch, false, fmt.Errorf("insert message: tuple type %q, want 'N'", kind)
		}
		rel := d.relations[relID]
		if rel == nil && r.err == nil {
			return ch, false, fmt.Errorf("insert message for relation %d before its relation message", relID)
		}
		ch.Kind, ch.Relation, ok = KindInsert, rel, true
		ch.Values, err = decodeTuple(r)
		if err == nil && len(ch.Values) != len(rel.Columns) {
			err = fmt.Errorf("insert into %s.%s has %d values for %d columns", rel.Namespace, rel.Name, len(ch.Values), len(rel.Columns))
		}
		if err != nil {
			return Change{}, false, err
		}
	}
	if r.err != nil {
		return Change{}, false, fmt.Errorf("decoding pgoutput message %q: %w", data[0], r.err)
	}
	return ch, ok, nil
}

// decodeTuple reads TupleData into values that share one copied buffer.
func decodeTuple(r *reader) ([][]byte, error) {
	n := int(r.u16())
	if r.err != nil {
		return nil, r.err
	}
	buf := make([]byte, len(r.b))
	copy(buf, r.b)
	r.b = buf
	values := make([][]byte, n)
	for i := range values {
		switch kind := r.u8(); kind {
		case 'n':
			values[i] = nil
		case 'b', 't':
			l := int(r.u32())
			if l < 0 || l > len(r.b) {
				return nil, errShort
			}
			values[i] = r.n(l)
			if kind == 't' {
				return nil, fmt.Errorf("column %d arrived in text format; the relay reads binary pgoutput", i)
			}
		case 'u':
			return nil, fmt.Errorf("column %d is an unchanged TOAST value, impossible in an insert", i)
		default:
			if r.err == nil {
				return nil, fmt.Errorf("column %d has unknown tuple data kind %q", i, kind)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	return values, nil
}
