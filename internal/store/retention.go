package store

import (
	"context"
	_ "embed" // the statements
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
)

//go:embed sql/retention.sql
var retentionSQL string

var (
	//go:embed sql/retention_lock_holder.sql
	retentionLockHolderSQL string
	//go:embed sql/retention_progress.sql
	retentionProgressSQL string
	//go:embed sql/retention_progress_save.sql
	retentionProgressSaveSQL string
)

// setWALCompression sets wal_compression for the rest of the transaction.
const setWALCompression = `SELECT pg_catalog.set_config('wal_compression', $1, true)`

// retentionLockTimeout bounds how long a retention step waits on a row
// another session holds before it is taken again skipping the held rows
// (retention.sql): a resend's or a person's lock is brief; a status row
// held for long must not stop retention. An event's row held by its owner,
// or a table's lock (a migration's), fails the step, and the next pass
// tries again.
const retentionLockTimeout = `SELECT pg_catalog.set_config('lock_timeout', '200ms', true)`

// retentionLock is the advisory lock key of the relay that runs retention:
// one at a time.
const retentionLock = "outbox-relay/retention"

// RetentionCursor is where a retention walk is: at the events created at
// At, past the first Past of them, which earlier steps walked and kept
// (FAILED, PENDING, held). The zero cursor is the oldest event.
type RetentionCursor struct {
	At   time.Time
	Past int64
}

// RetentionStep walks up to limit events created in [from.At, cutoff),
// past from.Past, and deletes the SENT ones with their delivery rows:
// events of outbox.events, or with mapped, the status rows of mapped events
// (retention_mapped.sql). It returns how many it walked, how many it
// deleted, and the cursor after them (from itself if it walked none): at
// the last one's instant, past those of it that this step and, at the same
// instant, earlier ones kept (retention.sql says why). With compress (a
// wal_compression value, RetentionWALCompression), its transaction writes
// its WAL so compressed, whatever the server's setting.
func (s *Store) RetentionStep(ctx context.Context, mapped bool, from RetentionCursor, cutoff time.Time, limit int, compress string) (walked int, deleted int64, to RetentionCursor, err error) {
	sql := retentionSQL
	if mapped {
		sql = retentionMappedSQL
	}
	var last *time.Time
	var kept int64
	step := func(skipLocked bool) error {
		// One batch is one implicit transaction (one Sync), so the
		// settings, local to it, hold for the step, and go with its commit:
		// they must be in force before the DELETE waits or writes, which a
		// set_config in the step's own statement would not promise.
		b := &pgx.Batch{}
		b.Queue(retentionLockTimeout)
		if compress != "" {
			b.Queue(setWALCompression, compress)
		}
		b.Queue(sql, from.At, cutoff, limit, from.Past, skipLocked).QueryRow(func(row pgx.Row) error {
			return row.Scan(&walked, &last, &deleted, &kept)
		})
		return s.db.SendBatch(ctx, b).Close()
	}
	err = step(false)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		err = step(true) // a status row held past the lock timeout: skip it
	}
	switch {
	case err != nil:
		return 0, 0, from, fmt.Errorf("deleting delivered events: %w", err)
	case last == nil:
		return walked, deleted, from, nil
	case last.Equal(from.At):
		return walked, deleted, RetentionCursor{from.At, from.Past + kept}, nil
	}
	return walked, deleted, RetentionCursor{*last, kept}, nil
}

// RetentionProgress is where a retention walk has got to (Walked; zero:
// from the oldest), in a walk that went on from one that began at the
// oldest event at FullWalkAt.
type RetentionProgress struct {
	Walked     RetentionCursor
	FullWalkAt time.Time
}

// walkName names the walk over events or, with mapped, over the status rows
// of mapped events, in outbox.retention_progress.
func walkName(mapped bool) string {
	if mapped {
		return "mapped"
	}
	return "events"
}

// RetentionProgress reads where the retention walk over events (or, with
// mapped, over mapped events' status rows) got to; ok is false if none has
// been recorded.
func (s *Store) RetentionProgress(ctx context.Context, mapped bool) (p RetentionProgress, ok bool, err error) {
	err = s.db.QueryRow(ctx, retentionProgressSQL, walkName(mapped)).Scan(&p.Walked.At, &p.Walked.Past, &p.FullWalkAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return RetentionProgress{}, false, nil
	}
	if err != nil {
		return RetentionProgress{}, false, fmt.Errorf("reading where retention got to: %w", err)
	}
	return p, true, nil
}

// SaveRetentionProgress records where the retention walk over events (or,
// with mapped, over mapped events' status rows) has got to.
func (s *Store) SaveRetentionProgress(ctx context.Context, mapped bool, p RetentionProgress) error {
	if _, err := s.db.Exec(ctx, retentionProgressSaveSQL, walkName(mapped), p.Walked.At, p.Walked.Past, p.FullWalkAt); err != nil {
		return fmt.Errorf("recording where retention got to: %w", err)
	}
	return nil
}

// WALCompression returns the server's wal_compression setting (off, on,
// pglz, lz4 or zstd): retention's deletes write a page image for nearly
// every page they touch, which it compresses.
func WALCompression(ctx context.Context, db DB) (string, error) {
	var v string
	if err := db.QueryRow(ctx, `SELECT pg_catalog.current_setting('wal_compression')`).Scan(&v); err != nil {
		return "", fmt.Errorf("reading wal_compression: %w", err)
	}
	return v, nil
}

// RetentionWALCompression returns the wal_compression value retention's
// steps may set for their own transactions (RetentionStep's compress): ""
// if db's role may not set it (wal_compression is a superuser's setting: PostgreSQL 15
// and newer let migrate GRANT SET ON PARAMETER wal_compression TO
// outbox_relay, roles.sql); else lz4 when the server was built with it,
// else on (pglz). It tries each in a transaction it rolls back.
func RetentionWALCompression(ctx context.Context, db beginner) (string, error) {
	for _, v := range []string{"lz4", "on"} {
		tx, err := db.Begin(ctx)
		if err != nil {
			return "", fmt.Errorf("trying wal_compression: %w", err)
		}
		_, err = tx.Exec(ctx, setWALCompression, v)
		if rerr := tx.Rollback(ctx); err == nil && rerr != nil {
			return "", fmt.Errorf("trying wal_compression: %w", rerr)
		}
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return v, nil
		case errors.As(err, &pgErr) && pgErr.Code == "22023": // invalid_parameter_value: built without lz4
			continue
		case pgdial.IsDenied(err):
			return "", nil
		default:
			return "", fmt.Errorf("trying wal_compression: %w", err)
		}
	}
	return "", nil
}

// TryRetentionLock takes the retention advisory lock for the session of db
// (a dedicated connection), reporting whether it got it.
func TryRetentionLock(ctx context.Context, db DB) (bool, error) {
	var ok bool
	if err := db.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended($1::text, 0::bigint))`, retentionLock).Scan(&ok); err != nil {
		return false, fmt.Errorf("taking the retention lock: %w", err)
	}
	return ok, nil
}

// ReleaseRetentionLock lets go of the retention lock db's session holds.
// Closing the session would too, but only once its backend has exited,
// after the close returns: another relay trying at once could find it held.
func ReleaseRetentionLock(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, `SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1::text, 0::bigint))`, retentionLock); err != nil {
		return fmt.Errorf("releasing the retention lock: %w", err)
	}
	return nil
}

// LockHolder is the session that holds a lock: its pid, role and
// application_name, and whether it may be a relay's (Relay).
type LockHolder struct {
	PID       int32
	User, App string
	Relay     bool
}

// RetentionLockHolder returns who holds the retention lock, if anyone
// does (retention_lock_holder.sql).
func RetentionLockHolder(ctx context.Context, db DB) (LockHolder, bool, error) {
	var h LockHolder
	err := db.QueryRow(ctx, retentionLockHolderSQL, retentionLock).Scan(&h.PID, &h.User, &h.App, &h.Relay)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("reading who holds the retention lock: %w", err)
	}
	return h, true, nil
}

// PurgeFilter selects the events Purge deletes: status (SENT, FAILED or
// SKIPPED) and created longer than OlderThan ago; zero filters match
// anything (Reason: failure_reason; Since and Until bound created_at).
type PurgeFilter struct {
	OlderThan                time.Duration
	Status                   string
	Topic, EventType, Reason string
	Since, Until             *time.Time
}

// Purge deletes up to batch events matching f, with their status rows,
// through outbox.purge, and returns how many.
func (s *Store) Purge(ctx context.Context, f PurgeFilter, batch int) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT outbox.purge(make_interval(secs => $1), $2, $3, $4, $5, $6, $7, $8)`,
		f.OlderThan.Seconds(), f.Status, batch, nullable(f.Topic), nullable(f.EventType), nullable(f.Reason),
		f.Since, f.Until).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("purging %s events older than %s: %w", f.Status, f.OlderThan, err)
	}
	return n, nil
}
