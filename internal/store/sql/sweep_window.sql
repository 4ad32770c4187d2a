-- Where a sweep of at most $3 events from $1 (up to the horizon $2) can
-- stop: the created_at of the $3-th event from $1 in created_at order, or
-- no row when fewer lie before the horizon. One walk of
-- events_created_at_idx over at most $3 entries, so that the sweep that
-- follows sorts only those (and the ones sharing that created_at) rather
-- than every event up to the horizon.
SELECT e.created_at FROM outbox.events e
WHERE e.created_at >= $1 AND e.created_at < $2
ORDER BY e.created_at
OFFSET $3 - 1 LIMIT 1
