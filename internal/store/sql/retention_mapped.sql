-- One step of --retention over mapped events (retention.sql's contract):
-- walks their status rows by created_at from a cursor ($1) up to a
-- cut-off ($2), at most $3 of them past the first $4, and deletes the SENT
-- ones with their copies, if any. The application's table is never
-- touched.
WITH unhurried AS (
    -- Its commit does not wait for its WAL flush: retention.sql says why.
    SELECT pg_catalog.set_config('synchronous_commit', 'off', true)
), walked AS (
    SELECT w.event_id, w.created_at FROM outbox.retention_walk_mapped($1, $2, $3, $4) w
), locked AS (
    -- Only with $5: retention.sql says when.
    SELECT d.event_id FROM walked w JOIN outbox.deliveries d ON d.event_id = w.event_id
    WHERE $5 AND d.status = 'SENT'
    FOR UPDATE OF d SKIP LOCKED
), deleted AS (
    -- Each status row taken by its DELETE, its status re-checked then.
    DELETE FROM outbox.deliveries d USING walked w
    WHERE d.event_id = w.event_id AND d.status = 'SENT' AND d.source IS NOT NULL
      AND (NOT $5 OR d.event_id IN (SELECT event_id FROM locked))
    RETURNING d.event_id, d.created_at
), copies AS (
    DELETE FROM outbox.mapped_events m USING deleted WHERE m.id = deleted.event_id
), latest AS (
    SELECT max(created_at) AS at FROM walked
)
SELECT (SELECT count(*) FROM walked), latest.at, (SELECT count(*) FROM deleted),
       (SELECT count(*) FROM walked WHERE created_at = latest.at) - (SELECT count(*) FROM deleted WHERE created_at = latest.at)
FROM unhurried, latest
