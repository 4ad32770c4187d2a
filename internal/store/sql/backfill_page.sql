-- The next $4 events without a status row after the cursor ($1 created_at,
-- $2 seq, $3 id), in the snapshot of the transaction it runs in (the new
-- slot's), in (created_at, seq) order: per key, each page holds a prefix of
-- what the backfill will find (see sweep.sql), so the poller, which
-- delivers these rows as the backfill writes them, never sees a key's later
-- event without its earlier one. seq is NULL for events from before it
-- existed: they come first, by id.
SELECT e.id, e.created_at, coalesce(e.seq, 0) FROM outbox.events e
WHERE e.created_at >= $1 AND (e.created_at, coalesce(e.seq, 0), e.id) > ($1, $2, $3)
  AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
ORDER BY e.created_at, coalesce(e.seq, 0), e.id
LIMIT $4
