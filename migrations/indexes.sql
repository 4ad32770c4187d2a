-- Indexes built CONCURRENTLY, after the migrations, by `outbox-relay
-- migrate`: writers are not blocked while they build, whatever the tables'
-- size (a migration runs in a transaction, where CONCURRENTLY cannot). No
-- statement needs them to be right, only to be fast: the operator
-- console's pages on millions of status rows (internal/store/sql/events_*.sql,
-- overview_*.sql). One statement per paragraph; each is idempotent, and an
-- index a failed build left invalid is dropped and built again.

-- The event list filtered by key, and lookup by key: outbox.events' and
-- the kept records' rows of a key, newest first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS events_key_idx ON outbox.events (key, id) WHERE key IS NOT NULL;

CREATE INDEX CONCURRENTLY IF NOT EXISTS mapped_events_key_idx ON outbox.mapped_events (key, id) WHERE key IS NOT NULL;

-- The event list filtered by a status other than SENT, newest first: read
-- in event id order, the planner no longer walks the primary key hoping to
-- meet such rows soon (FAILED rows among the oldest of a million took 0.4
-- to 1 s that way). SENT rows, most of the table, are not in it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_status_idx ON outbox.deliveries (status, event_id) WHERE status <> 'SENT';

-- The event list filtered by reason: the rows that have one are few.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_reason_idx ON outbox.deliveries (failure_reason, event_id) WHERE failure_reason IS NOT NULL;

-- The age of the oldest PENDING event, on the overview.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_pending_created_idx ON outbox.deliveries (created_at) WHERE status = 'PENDING';

-- The failures the relay has yet to publish on the dead-letter topic
-- (--dead-letter-topic), oldest first; published ones drop out of it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_dead_letter_due_idx ON outbox.deliveries (updated_at) WHERE status = 'FAILED' AND (dead_lettered_at IS NULL OR dead_lettered_at < updated_at);

-- The console's counts per status and topic (the overview): every topic of
-- each status that is not SENT, walked one index descent each, each
-- counted from this index alone up to a bound.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_status_topic_idx ON outbox.deliveries (status, topic, source) WHERE status <> 'SENT';

-- The overview's rows that are not SENT and carry no topic (events that
-- could not be mapped to one, rows from before version 8): few or none, so
-- that counting them never scans the table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_no_topic_idx ON outbox.deliveries (status) WHERE topic IS NULL AND status <> 'SENT';

-- FAILED events by reason (the overview, `outbox-relay status`) and the
-- FAILED list filtered by reason, newest or oldest first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_failed_reason_idx ON outbox.deliveries (failure_reason, updated_at, event_id) WHERE status = 'FAILED';

-- FAILED rows without a reason (from before reasons were kept): few or
-- none, so that the overview counts them without a scan.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_failed_no_reason_idx ON outbox.deliveries (event_id) WHERE status = 'FAILED' AND failure_reason IS NULL;

-- The FAILED list filtered by topic, newest or oldest first, and its count.
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_failed_topic_idx ON outbox.deliveries (topic, updated_at, event_id) WHERE status = 'FAILED';

-- The stream's queued keys under --failed-key-policy continue
-- (internal/store/sql/queued_keys_continue.sql, every second between
-- batches): the keys with an event queued and not yet attempted, one index
-- descent a key. FAILED rows hold no key under continue and are not in it:
-- walking deliveries_key_order_idx instead read every keyed FAILED row on
-- each refresh (131 ms a refresh at 20,000 FAILED; the stream's p99 at
-- 1,000/s went to seconds as FAILED rows piled up).
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_queued_key_idx ON outbox.deliveries (topic, key) WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING') AND attempts = 0;
