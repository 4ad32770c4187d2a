package relay

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/outbox-relay/outbox-relay/cdc"
	"github.com/outbox-relay/outbox-relay/retry"
)

// Defaults for PollerConfig.
const (
	PollIntervalDefault   = 200 * time.Millisecond
	PollBatchSizeDefault  = 500
	StuckThresholdDefault = 5 * time.Minute
	GapGraceDefault       = 5 * time.Minute
	GapLookbackDefault    = 24 * time.Hour
	GapRecheckDefault     = 30 * time.Second
	GapMaxSlotLagDefault  = 64 << 20
)

// PollerConfig configures the fallback poller that runs in every relay.
type PollerConfig struct {
	// Interval between polls when there was nothing to do.
	Interval time.Duration
	// BatchSize caps rows claimed, recovered or swept per statement.
	BatchSize int
	// StuckThreshold: PROCESSING rows locked longer than this are taken back.
	StuckThreshold time.Duration
	// GapGrace: events younger than this are left to the stream; older ones
	// without a status row are delivered by the gap sweep. -1 means 0.
	GapGrace time.Duration
	// GapRecheck: when it is longer than GapGrace (poll mode), a second,
	// slower pass of the gap sweep trails this far behind now, for events
	// whose created_at is older than their commit by more than the first
	// pass allows for (10 ms): a transaction stalled between taking its
	// start time and reporting it, or an application setting created_at.
	GapRecheck time.Duration
	// GapLookback is how far back the first sweep after start looks.
	GapLookback time.Duration
	// GapMaxSlotLag pauses the sweep (stream mode) while the slot is more
	// than this many bytes of WAL behind: the stream will bring those events.
	GapMaxSlotLag int64
	// InstanceID is written to locked_by; unique per process.
	InstanceID string
}

func (c PollerConfig) withDefaults() PollerConfig {
	c.Interval = cmp.Or(c.Interval, PollIntervalDefault)
	c.BatchSize = cmp.Or(c.BatchSize, PollBatchSizeDefault)
	c.StuckThreshold = cmp.Or(c.StuckThreshold, StuckThresholdDefault)
	c.GapGrace = cmp.Or(c.GapGrace, GapGraceDefault)
	if c.GapGrace < 0 {
		c.GapGrace = 0
	}
	c.GapLookback = cmp.Or(c.GapLookback, GapLookbackDefault)
	c.GapRecheck = cmp.Or(c.GapRecheck, GapRecheckDefault)
	c.GapMaxSlotLag = cmp.Or(c.GapMaxSlotLag, GapMaxSlotLagDefault)
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		c.InstanceID = fmt.Sprintf("%s-%d", cmp.Or(host, "relay"), os.Getpid())
	}
	return c
}

func (c PollerConfig) validate() error {
	switch {
	case c.Interval < time.Millisecond:
		return errors.New("--poll-interval must be at least 1ms")
	case c.BatchSize < 1:
		return errors.New("--poll-batch-size must be at least 1")
	case c.GapRecheck < 0:
		return errors.New("--gap-recheck must not be negative")
	case c.StuckThreshold < time.Second:
		return errors.New("--stuck-threshold must be at least 1s")
	}
	return nil
}

// claimSQL takes due rows, oldest first, skipping rows another instance
// holds, and returns each with its event in binary format (the layout that
// serves the stream reads it). prev_delay_ms is the wait that led here.
const claimSQL = `
WITH due AS (
    SELECT event_id, next_attempt_at, updated_at FROM outbox.deliveries
    WHERE status = 'PENDING' AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox.deliveries d
SET status = 'PROCESSING', locked_by = $1, locked_at = now(), updated_at = now()
FROM due JOIN outbox.events e ON e.id = due.event_id
WHERE d.event_id = due.event_id
RETURNING d.attempts AS relay_attempts, d.max_attempts AS relay_max_attempts,
          d.retry_policy AS relay_retry_policy,
          (extract(epoch FROM due.next_attempt_at - due.updated_at) * 1000)::bigint AS relay_prev_delay_ms,
          e.*`

// outcomeSQL records what happened to claimed rows, only where this instance
// still holds them: a row re-claimed after it was taken back is not touched.
const outcomeSQL = `
UPDATE outbox.deliveries d
SET status = u.status, attempts = u.attempts,
    last_error = NULLIF(u.last_error, ''), failure_reason = NULLIF(u.reason, ''),
    next_attempt_at = now() + u.delay_ms * interval '1 millisecond',
    kafka_partition = CASE WHEN u.status = 'SENT' THEN u.part ELSE d.kafka_partition END,
    kafka_offset = CASE WHEN u.status = 'SENT' THEN u.off ELSE d.kafka_offset END,
    sent_at = CASE WHEN u.status = 'SENT' THEN now() ELSE d.sent_at END,
    locked_by = NULL, locked_at = NULL, updated_at = now()
FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[], $7::int[], $8::bigint[])
     AS u(id, status, attempts, last_error, reason, delay_ms, part, off)
WHERE d.event_id = u.id AND d.status = 'PROCESSING' AND d.locked_by = $9`

// releaseSQL hands back, uncounted, what this instance claimed but did not
// finish (a graceful stop).
const releaseSQL = `
UPDATE outbox.deliveries SET status = 'PENDING', locked_by = NULL, locked_at = NULL, updated_at = now()
WHERE status = 'PROCESSING' AND locked_by = $1`

// stuckSQL takes back rows left PROCESSING by an instance that died. That
// counts as an attempt, so an event that crashes the relay cannot loop.
const stuckSQL = `
WITH stuck AS (
    SELECT event_id FROM outbox.deliveries
    WHERE status = 'PROCESSING' AND locked_at < now() - $1 * interval '1 millisecond'
    ORDER BY locked_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox.deliveries d
SET attempts = d.attempts + 1,
    status = CASE WHEN d.attempts + 1 >= d.max_attempts THEN 'FAILED' ELSE 'PENDING' END,
    failure_reason = CASE WHEN d.attempts + 1 >= d.max_attempts THEN 'RETRIES_EXHAUSTED' END,
    last_error = format('stuck in PROCESSING since %s (claimed by %s): the relay holding it stopped without finishing',
                        d.locked_at, d.locked_by),
    next_attempt_at = now(), locked_by = NULL, locked_at = NULL, updated_at = now()
FROM stuck
WHERE d.event_id = stuck.event_id
RETURNING d.event_id::text, d.status, d.last_error`

// horizonSQL is how far the gap sweep may walk: the grace window ($1 ms)
// ago, and never past the start of the oldest transaction open in this
// database. created_at defaults to now(), the transaction's start, so an open
// transaction (even one that has not written yet) may still commit events
// older than anything swept so far. 10 ms cover the gap between a
// transaction taking its start time and reporting it. The second column is
// the same with the recheck delay ($2 ms) instead of the grace.
//
// It must run in its own statement, before the sweep's: a sweep that read
// pg_stat_activity after taking its snapshot could miss a transaction that
// committed in between (gone from pg_stat_activity, invisible to the
// snapshot) and walk past its events for good.
const horizonSQL = `
WITH open AS (
    SELECT least(coalesce((SELECT min(xact_start) FROM pg_stat_activity
                           WHERE xact_start IS NOT NULL AND backend_type = 'client backend'
                             AND datname = current_database() AND pid <> pg_backend_pid()), 'infinity'),
                 coalesce((SELECT min(prepared) FROM pg_prepared_xacts), 'infinity')) AS oldest
)
SELECT least(now() - $1 * interval '1 millisecond', oldest) - interval '10 milliseconds',
       least(now() - $2 * interval '1 millisecond', oldest) - interval '10 milliseconds'
FROM open`

// sweepSQL gives a PENDING row to committed events that have none, walking
// events by created_at from a cursor ($1) up to a horizon ($2, horizonSQL).
const sweepSQL = `
WITH found AS (
    SELECT e.id, e.created_at, e.max_attempts FROM outbox.events e
    WHERE e.created_at >= $1 AND e.created_at < $2
      AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
    ORDER BY e.created_at
    LIMIT $3
), ins AS (
    INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, max_attempts, retry_policy)
    SELECT id, 'PENDING', 0, now(), coalesce(max_attempts, $4), $5::jsonb FROM found
    ON CONFLICT (event_id) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM found), (SELECT max(created_at) FROM found), (SELECT count(*) FROM ins)`

// slotLagSQL is how many bytes of WAL the stream's slot has not confirmed.
const slotLagSQL = `
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
FROM pg_replication_slots WHERE slot_name = $1`

// Poller is the fallback delivery path: it retries PENDING rows with backoff,
// takes back rows whose relay died, and delivers committed events that the
// stream never did (the gap sweep). Every relay runs one; --mode=poll runs
// only it.
type Poller struct {
	r      *Relay
	cfg    PollerConfig
	log    *zap.Logger
	slot   string    // "" in poll mode: no slot to wait for
	cursor time.Time // the gap sweep's
	// recheck is the recheck pass's cursor (GapRecheck), run at rechecked.
	recheck   time.Time
	rechecked time.Time
	pgDown    *outage
	blocked   bool
}

func newPoller(r *Relay, slot string) *Poller {
	return &Poller{r: r, cfg: r.cfg.Poll, log: r.log.With(zap.String("component", "poller")), slot: slot,
		pgDown: newOutage(r.log, "postgres (poller)")}
}

// run polls until ctx ends, then hands back what it holds.
func (p *Poller) run(ctx context.Context) {
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := p.r.pool.Exec(ctx, releaseSQL, p.cfg.InstanceID); err != nil {
			p.log.Warn("handing back claimed rows at stop", zap.Error(err))
		}
	}()
	p.cursor = time.Now().Add(-p.cfg.GapLookback)
	p.recheck = p.cursor
	for ctx.Err() == nil {
		busy, err := p.runOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.pgDown.failed(err)
		} else {
			p.pgDown.ok()
		}
		if busy && err == nil {
			continue // a full batch: there is more to do now
		}
		if !sleep(ctx, p.cfg.Interval) {
			return
		}
	}
}

// runOnce does one round: take back stuck rows, sweep for gaps, claim and
// deliver due rows. busy says a full batch was found.
func (p *Poller) runOnce(ctx context.Context) (busy bool, err error) {
	if err := p.recoverStuck(ctx); err != nil {
		return false, err
	}
	swept, err := p.sweep(ctx)
	if err != nil {
		return false, err
	}
	if !p.r.pub.Available() {
		return false, nil // Kafka is down: claim nothing
	}
	claimed, err := p.deliver(ctx)
	if err != nil {
		return false, err
	}
	return claimed == p.cfg.BatchSize || swept == p.cfg.BatchSize, nil
}

func (p *Poller) recoverStuck(ctx context.Context) error {
	rows, err := p.r.pool.Query(ctx, stuckSQL, p.cfg.StuckThreshold.Milliseconds(), p.cfg.BatchSize)
	if err != nil {
		return fmt.Errorf("taking back stuck rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, lastErr string
		if err := rows.Scan(&id, &status, &lastErr); err != nil {
			return fmt.Errorf("taking back stuck rows: %w", err)
		}
		p.log.Warn("took back a row stuck in PROCESSING (counted as an attempt)",
			zap.String("event_id", id), zap.String("status", status), zap.String("last_error", lastErr))
	}
	return rows.Err()
}

// sweep delivers, through PENDING rows, events that have no status row.
func (p *Poller) sweep(ctx context.Context) (int, error) {
	if p.slot != "" {
		var lag *int64
		err := p.r.pool.QueryRow(ctx, slotLagSQL, p.slot).Scan(&lag)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("reading slot lag: %w", err)
		}
		if lag != nil && *lag > p.cfg.GapMaxSlotLag {
			if !p.blocked {
				p.log.Info("gap sweep paused while the stream catches up", zap.Int64("slot_lag_bytes", *lag))
				p.blocked = true
			}
			return 0, nil
		}
		p.blocked = false
	}
	var upper, recheckUpper time.Time
	err := p.r.pool.QueryRow(ctx, horizonSQL, p.cfg.GapGrace.Milliseconds(), p.cfg.GapRecheck.Milliseconds()).
		Scan(&upper, &recheckUpper)
	if err != nil {
		return 0, fmt.Errorf("gap sweep horizon: %w", err)
	}
	found, inserted, err := p.sweepRange(ctx, &p.cursor, upper)
	if err != nil {
		return 0, err
	}
	if inserted > 0 && p.slot != "" {
		p.log.Warn("gap sweep found committed events the stream never delivered; delivering them",
			zap.Int("events", inserted), zap.Time("up_to", p.cursor))
	}
	if p.cfg.GapRecheck > p.cfg.GapGrace && time.Since(p.rechecked) >= max(p.cfg.Interval, time.Second) {
		p.rechecked = time.Now()
		// Only ground the first pass has walked: anything ahead is its job.
		_, late, err := p.sweepRange(ctx, &p.recheck, minTime(recheckUpper, p.cursor))
		if err != nil {
			return 0, err
		}
		if late > 0 {
			p.log.Warn("gap recheck found events the first pass had walked past (their created_at is older than "+
				"their commit by more than the sweep allows for); delivering them",
				zap.Int("events", late), zap.Time("up_to", p.recheck))
		}
	}
	return found, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sweepRange runs the sweep from *cursor up to upper and moves the cursor:
// to the last event found when the batch was full (more to walk), else to
// upper. It returns the events found and the PENDING rows it inserted.
func (p *Poller) sweepRange(ctx context.Context, cursor *time.Time, upper time.Time) (found, inserted int, err error) {
	var last *time.Time
	pol := p.r.cfg.Retry
	err = p.r.pool.QueryRow(ctx, sweepSQL, *cursor, upper, p.cfg.BatchSize, pol.MaxAttempts, pol.JSON()).
		Scan(&found, &last, &inserted)
	if err != nil {
		return 0, 0, fmt.Errorf("gap sweep: %w", err)
	}
	switch {
	case found == p.cfg.BatchSize && last != nil:
		*cursor = *last
	case upper.After(*cursor):
		*cursor = upper
	}
	return found, inserted, nil
}

// deliver claims due rows, publishes them and records the outcomes.
func (p *Poller) deliver(ctx context.Context) (int, error) {
	rows, err := p.r.pool.Query(ctx, claimSQL, pgx.QueryResultFormats{pgx.BinaryFormatCode}, p.cfg.InstanceID, p.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("claiming due rows: %w", err)
	}
	b, meta, err := p.readClaim(rows)
	if err != nil {
		return 0, err
	}
	if len(b.events) == 0 {
		return 0, nil
	}
	// Look each topic up afresh once per batch: a resend after the topic was
	// created or the ACL granted must not meet a remembered failure.
	checked := map[string]bool{}
	for i := range b.events {
		if t := b.events[i].msg.Topic; b.events[i].invalid == "" && !checked[t] {
			checked[t] = true
			_, _ = p.r.pub.topics.refresh(t)
		}
	}
	b.pending.Store(int32(len(b.events)) + 1)
	if err := p.r.publishBatch(ctx, b); err != nil {
		return len(b.events), nil // stopping: the rows are handed back
	}
	b.complete()
	select {
	case <-b.done:
	case <-ctx.Done():
		return len(b.events), nil
	}
	out := &statusRows{}
	for i := range b.events {
		e, m := &b.events[i], meta[i]
		if e.res.status != StatusFailed || e.res.reason != ReasonInvalidEvent {
			e.res.attempts = m.attempts + 1
		} else {
			e.res.attempts = m.attempts
		}
		p.r.settle(&e.res, m.policy, m.prevDelay)
		out.add(e, int32(m.policy.MaxAttempts))
	}
	if _, err := p.r.pool.Exec(context.WithoutCancel(ctx), outcomeSQL, out.ids, out.statuses, out.attempts,
		out.lastErrors, out.reasons, out.delaysMS, out.partitions, out.offsets, p.cfg.InstanceID); err != nil {
		return len(b.events), fmt.Errorf("recording %d outcomes: %w", len(b.events), err)
	}
	return len(b.events), nil
}

// claimMeta is what a claimed row says about its retries.
type claimMeta struct {
	attempts  int32
	policy    retry.Policy
	prevDelay time.Duration
}

// readClaim turns claimed rows into a batch of events. The first four
// columns are the relay_* ones of claimSQL, the rest the event's.
func (p *Poller) readClaim(rows pgx.Rows) (*batch, []claimMeta, error) {
	defer rows.Close()
	rel := &cdc.Relation{Namespace: "outbox", Name: "events"}
	for _, fd := range rows.FieldDescriptions() {
		rel.Columns = append(rel.Columns, cdc.Column{Name: fd.Name, TypeOID: fd.DataTypeOID})
	}
	l, err := newLayout(rel)
	if err != nil {
		return nil, nil, err
	}
	var all [][][]byte
	var meta []claimMeta
	for rows.Next() {
		raw := rows.RawValues()
		values := make([][]byte, len(raw))
		for i, v := range raw {
			if v != nil {
				values[i] = append(make([]byte, 0, len(v)), v...)
			}
		}
		if len(values) < 4 || len(values[0]) != 4 || len(values[1]) != 4 {
			return nil, nil, errors.New("claimed row: unexpected relay columns")
		}
		m := claimMeta{attempts: int32(binary.BigEndian.Uint32(values[0]))}
		var stored []byte
		if v := values[2]; len(v) > 1 {
			stored = v[1:] // jsonb binary: version byte, then text
		}
		m.policy = p.r.storedPolicy(stored, int32(binary.BigEndian.Uint32(values[1])))
		if v := values[3]; len(v) == 8 {
			m.prevDelay = time.Duration(int64(binary.BigEndian.Uint64(v))) * time.Millisecond
		}
		meta = append(meta, m)
		all = append(all, values)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("claiming due rows: %w", err)
	}
	b := &batch{events: make([]event, len(all)), done: make(chan struct{})}
	now := time.Now()
	for i, values := range all {
		l.fill(&b.events[i], values, now)
	}
	b.seal()
	return b, meta, nil
}
