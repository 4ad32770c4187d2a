package store

import (
	"cmp"
	"context"
	_ "embed" // the statements
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/cdc"
)

var (
	//go:embed sql/claim.sql
	claimSQL string
	//go:embed sql/release.sql
	releaseSQL string
	//go:embed sql/release_backfilled.sql
	releaseBackfilledSQL string
	//go:embed sql/rescue_stuck.sql
	rescueStuckSQL string
	//go:embed sql/sweep_horizon.sql
	sweepHorizonSQL string
	//go:embed sql/sweep.sql
	sweepSQL string
	//go:embed sql/sweep_events.sql
	sweepEventsSQL string
	//go:embed sql/sweep_window.sql
	sweepWindowSQL string
	//go:embed sql/slot_lag.sql
	slotLagSQL string
	//go:embed sql/slot_holder.sql
	slotHolderSQL string
)

// Claimed is a batch of rows taken for delivery, each with its event.
type Claimed struct {
	// Events describes the event columns of every row's Values.
	Events *cdc.Relation
	Rows   []ClaimedRow
}

// ClaimedRow is one claimed status row and its event.
type ClaimedRow struct {
	Attempts    int32
	MaxAttempts int32  // 0: the row has none of its own
	RetryPolicy []byte // the stored policy's JSON; nil when the row has none
	// PrevDelay is the wait that led to this attempt.
	PrevDelay time.Duration
	// Values are the event's columns in binary format, all nil for a
	// mapped event: its record is Copy.
	Values  [][]byte
	EventID [16]byte
	Copy    *Copy // a mapped event's record; nil when it was purged
	Mapped  bool
}

// claimColumns is how many relay_* columns precede the event's in claim.sql.
const claimColumns = 8

// Claim takes up to limit due PENDING rows for instance (PROCESSING,
// locked_by), skipping rows another instance holds, and returns them in
// key order (insertion order: seq, then commit position). A row with a key is
// taken only when every earlier row of its topic and key that is PENDING or
// PROCESSING (and, with hold, FAILED) is taken with it: see claim.sql.
func (s *Store) Claim(ctx context.Context, instance string, limit int, hold bool) (*Claimed, error) {
	rows, err := s.readEvents(ctx, claimSQL, pgx.QueryResultFormats{pgx.BinaryFormatCode}, instance, limit, s.now(), hold)
	if err != nil {
		return nil, fmt.Errorf("claiming due rows: %w", err)
	}
	c := &Claimed{}
	c.Events, _, err = eachEventRow(rows, claimColumns, 0, func(raw, values [][]byte) error {
		if len(raw[0]) != 4 || len(raw[1]) != 4 {
			return errors.New("unexpected relay columns")
		}
		r := ClaimedRow{
			Attempts:    int32(binary.BigEndian.Uint32(raw[0])),
			MaxAttempts: int32(binary.BigEndian.Uint32(raw[1])),
		}
		if v := raw[2]; len(v) > 1 {
			r.RetryPolicy = append([]byte(nil), v[1:]...) // jsonb binary: version byte, then text
		}
		if v := raw[3]; len(v) == 8 {
			r.PrevDelay = time.Duration(int64(binary.BigEndian.Uint64(v))) * time.Millisecond
		}
		r.Values = values
		copy(r.EventID[:], raw[7])
		c.Rows = append(c.Rows, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming due rows: %w", err)
	}
	return c, s.attachCopies(ctx, c)
}

// attachCopies reads the records of c's mapped events.
func (s *Store) attachCopies(ctx context.Context, c *Claimed) error {
	return s.keptRecords(ctx, c.Events, len(c.Rows), func(i int) ([][]byte, [16]byte) { return c.Rows[i].Values, c.Rows[i].EventID },
		func(i int, cp *Copy) { c.Rows[i].Mapped, c.Rows[i].Copy = true, cp })
}

// keptRecords finds, among n rows of rel's columns (row(i): its values and
// event id), those without an outbox.events row, a mapped event's, and
// reads their kept records: attach(i, record) for each, record nil when
// it was purged.
func (s *Store) keptRecords(ctx context.Context, rel *cdc.Relation, n int, row func(i int) ([][]byte, [16]byte),
	attach func(i int, c *Copy)) error {
	id := rel.ColumnIndex("id")
	var mapped []int
	var ids [][16]byte
	for i := range n {
		if values, eventID := row(i); id >= 0 && values[id] == nil {
			mapped, ids = append(mapped, i), append(ids, eventID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	copies, err := s.Copies(ctx, ids)
	if err != nil {
		return err
	}
	for k, i := range mapped {
		var cp *Copy
		if c, ok := copies[ids[k]]; ok {
			cp = &c
		}
		attach(i, cp)
	}
	return nil
}

// eachEventRow reads rows of prefix relay columns followed by the columns of
// outbox.events, in binary format: it returns the events' relation and calls
// each with every row's raw values and a copy of its event's values (one
// allocation a row), until each returns an error, which it returns. It
// returns the size of the event values read; with maxBytes > 0 it stops
// after the row that takes it to maxBytes (so it stopped early exactly when
// size >= maxBytes). It closes rows.
func eachEventRow(rows pgx.Rows, prefix, maxBytes int, each func(raw, values [][]byte) error) (rel *cdc.Relation, size int, err error) {
	defer rows.Close()
	fds := rows.FieldDescriptions()
	if len(fds) < prefix { // the statement failed: no columns to read
		rows.Close()
		return nil, 0, cmp.Or(rows.Err(), errors.New("no columns returned"))
	}
	rel = &cdc.Relation{Namespace: "outbox", Name: "events"}
	for _, fd := range fds[prefix:] {
		rel.Columns = append(rel.Columns, cdc.Column{Name: fd.Name, TypeOID: fd.DataTypeOID})
	}
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(fds) {
			return rel, size, errors.New("unexpected columns")
		}
		n := 0
		for _, v := range raw[prefix:] {
			n += len(v)
		}
		// RawValues are only valid until the next row: one copy of them
		// all, each value a slice of it (nil stays nil: NULL).
		buf := make([]byte, 0, n)
		values := make([][]byte, len(raw)-prefix)
		for i, v := range raw[prefix:] {
			if v != nil {
				start := len(buf)
				buf = append(buf, v...)
				values[i] = buf[start:len(buf):len(buf)]
			}
		}
		if err := each(raw, values); err != nil {
			return rel, size, err
		}
		if size += n; maxBytes > 0 && size >= maxBytes {
			return rel, size, nil
		}
	}
	return rel, size, rows.Err()
}

// Release hands back, uncounted, the rows instance holds.
func (s *Store) Release(ctx context.Context, instance string) error {
	if _, err := s.db.Exec(ctx, releaseSQL, instance); err != nil {
		return fmt.Errorf("handing back claimed rows: %w", err)
	}
	return nil
}

// ReleaseBackfilled makes due up to limit rows that waited for a backfill
// (UntilBackfilled), once none is running, and returns how many.
func (s *Store) ReleaseBackfilled(ctx context.Context, limit int) (int64, error) {
	tag, err := s.db.Exec(ctx, releaseBackfilledSQL, limit, s.now())
	if err != nil {
		return 0, fmt.Errorf("releasing rows queued behind a backfill: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Rescued is a row taken back from an instance that died.
type Rescued struct {
	EventID, Status, LastError string
	Attempts                   int32
	Reason, Topic              string // Reason: RETRIES_EXHAUSTED when Status is FAILED
}

// RescueStuck takes back up to limit rows held PROCESSING for longer than
// threshold, counting an attempt; maxAttempts is the limit of rows without
// their own.
func (s *Store) RescueStuck(ctx context.Context, threshold time.Duration, limit, maxAttempts int) ([]Rescued, error) {
	return collect(ctx, s.db, "taking back stuck rows", func(r pgx.CollectableRow) (Rescued, error) {
		var x Rescued
		err := r.Scan(&x.EventID, &x.Status, &x.LastError, &x.Attempts, &x.Reason, &x.Topic)
		return x, err
	}, rescueStuckSQL, threshold.Milliseconds(), limit, maxAttempts, s.now())
}

// Sweep gives up to limit events created in [from, upper) without a status
// row a PENDING row, due now, with maxAttempts (unless the event has its
// own) and policy. It returns how many it found, the latest created_at
// among them, and how many rows it inserted.
func (s *Store) Sweep(ctx context.Context, from, upper time.Time, limit, maxAttempts int, policy []byte) (
	found int, last *time.Time, inserted int, err error) {
	err = s.db.QueryRow(ctx, sweepSQL, from, upper, limit, maxAttempts, policy, s.now()).Scan(&found, &last, &inserted)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("gap sweep: %w", err)
	}
	return found, last, inserted, nil
}

// sweepLock is the advisory lock of the relay whose gap sweep delivers the
// events it finds itself (SweepLocked): one at a time.
const sweepLock = "outbox-relay/sweep"

// SweepLocked runs fn with a Store whose statements run in one transaction
// that holds the sweep lock, and commits it, unless another relay's
// transaction holds the lock: then it runs nothing and reports false. The
// lock ends with the transaction, so a relay that dies holding it frees it.
func (s *Store) SweepLocked(ctx context.Context, fn func(tx *Store) error) (bool, error) {
	tx, db, limit, err := begin(ctx, s.db)
	if err != nil {
		return false, fmt.Errorf("gap sweep: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit: nothing to undo
	var locked bool
	if err := db.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtextextended($1::text, 0::bigint))`, sweepLock).Scan(&locked); err != nil {
		return false, fmt.Errorf("gap sweep: taking the sweep lock: %w", err)
	}
	if !locked {
		return false, nil
	}
	// The sweep's statements walk events_created_at_idx in order for a
	// round's worth of events. On statistics older than the outbox's
	// backlog (a range thought to hold 2,769 events held 200,000), the
	// planner read every event up to the horizon with a bitmap scan and
	// sorted them (77 ms a round for 2,000 of 200,000, against 1 ms).
	if _, err := db.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
		return false, fmt.Errorf("gap sweep: %w", err)
	}
	t := *s
	t.db, t.status, t.inTx = db, db, true
	if err := fn(&t); err != nil {
		return true, err
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("gap sweep: %w", err)
	}
	return true, nil
}

// SweepWindow returns where a sweep of at most limit events from from can
// stop looking: just past the limit-th event's created_at (windowed), or
// upper when fewer events lie before it.
func (s *Store) SweepWindow(ctx context.Context, from, upper time.Time, limit int) (end time.Time, windowed bool, err error) {
	var at time.Time
	switch err := s.db.QueryRow(ctx, sweepWindowSQL, from, upper, limit).Scan(&at); {
	case errors.Is(err, pgx.ErrNoRows):
		return upper, false, nil
	case err != nil:
		return upper, false, fmt.Errorf("gap sweep window: %w", err)
	}
	return at.Add(time.Microsecond), true, nil // created_at has microseconds
}

// SweepEvents reads, for delivery, up to limit events created in [from,
// upper) without a status row, in (created_at, seq) order, each with
// whether its key waits (with hold: behind any unfinished row; without:
// behind a queued one). It stops after the event that takes the values
// read to maxBytes, and says so (Full).
func (s *Store) SweepEvents(ctx context.Context, from, upper time.Time, limit, maxBytes int, hold bool) (*EventPage, error) {
	rows, err := s.readEvents(ctx, sweepEventsSQL, pgx.QueryResultFormats{pgx.BinaryFormatCode}, from, upper, limit, hold)
	if err != nil {
		return nil, fmt.Errorf("gap sweep: %w", err)
	}
	page, waits, last, full, err := readPage(rows, maxBytes) // last: the last event's created_at
	if err != nil {
		return nil, fmt.Errorf("gap sweep: %w", err)
	}
	page.Waits, page.Full = waits, full || len(page.Values) == limit
	if len(page.Values) > 0 {
		t := cdc.PgTime(last) // never wraps around, however far created_at is
		page.Last = &t
	}
	return page, nil
}

// SlotLag is how many bytes of WAL slot has not confirmed; ok is false when
// the slot does not exist.
func (s *Store) SlotLag(ctx context.Context, slot string) (lag int64, ok bool, err error) {
	var l *int64
	switch err := s.db.QueryRow(ctx, slotLagSQL, slot).Scan(&l); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("reading slot lag: %w", err)
	}
	if l == nil {
		return 0, false, nil
	}
	return *l, true, nil
}

// SlotHolder is the pid of the process streaming from slot, or 0 when no
// process does (or the slot does not exist).
func (s *Store) SlotHolder(ctx context.Context, slot string) (int, error) {
	var pid int
	switch err := s.db.QueryRow(ctx, slotHolderSQL, slot).Scan(&pid); {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading who holds slot %q: %w", slot, err)
	}
	return pid, nil
}
