-- One step of --retention: walks events by created_at from a cursor ($1) up
-- to a cut-off ($2), at most $3 of them, and deletes the SENT ones with
-- their delivery rows (FAILED and PENDING events are never deleted here).
-- Rows another session holds are skipped, and a row whose status changed
-- meanwhile is re-checked under its lock. Returns how many events it
-- walked, the latest created_at among them (the next cursor) and how many
-- it deleted.
WITH unhurried AS (
    -- This statement's commit does not wait for its WAL to reach the disk
    -- (synchronous_commit off for its own transaction): the stream's
    -- commits, which do, waited behind retention's flushes (the growth
    -- bench at 20,000,000 rows: IO/WALSync and LWLock/WALWrite waits while
    -- it deleted). A crash may undo its last few hundred milliseconds of
    -- deletes; the rows are SENT still, and a later pass deletes them again.
    SELECT pg_catalog.set_config('synchronous_commit', 'off', true)
), walked AS (
    SELECT e.id, e.created_at FROM outbox.events e
    WHERE e.created_at >= $1 AND e.created_at < $2
    ORDER BY e.created_at
    LIMIT $3
), doomed AS (
    SELECT w.id FROM walked w JOIN outbox.deliveries d ON d.event_id = w.id
    WHERE d.status = 'SENT'
    FOR UPDATE OF d SKIP LOCKED
), deleted AS (
    DELETE FROM outbox.events e USING doomed WHERE e.id = doomed.id RETURNING 1
)
SELECT (SELECT count(*) FROM walked), (SELECT max(created_at) FROM walked), (SELECT count(*) FROM deleted) FROM unhurried
