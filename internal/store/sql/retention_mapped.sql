-- One step of --retention over mapped events (retention.sql's contract):
-- walks their status rows by created_at from a cursor ($1) up to a
-- cut-off ($2), at most $3 of them, and deletes the SENT ones with their
-- copies, if any. The application's table is never touched.
WITH unhurried AS (
    -- Its commit does not wait for its WAL flush: retention.sql says why.
    SELECT pg_catalog.set_config('synchronous_commit', 'off', true)
), walked AS (
    SELECT d.event_id, d.created_at FROM outbox.deliveries d
    WHERE d.source IS NOT NULL AND d.created_at >= $1 AND d.created_at < $2
    ORDER BY d.created_at
    LIMIT $3
), doomed AS (
    SELECT d.event_id FROM walked w JOIN outbox.deliveries d ON d.event_id = w.event_id
    WHERE d.status = 'SENT'
    FOR UPDATE OF d SKIP LOCKED
), copies AS (
    DELETE FROM outbox.mapped_events m USING doomed WHERE m.id = doomed.event_id
), deleted AS (
    DELETE FROM outbox.deliveries d USING doomed WHERE d.event_id = doomed.event_id RETURNING 1
)
SELECT (SELECT count(*) FROM walked), (SELECT max(created_at) FROM walked), (SELECT count(*) FROM deleted) FROM unhurried
