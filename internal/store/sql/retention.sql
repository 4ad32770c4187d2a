-- One step of --retention: walks events by created_at from a cursor ($1) up
-- to a cut-off ($2), at most $3 of them, past the first $4 (the events
-- created at $1 that earlier steps walked and kept), and deletes the SENT
-- ones with their delivery rows (FAILED and PENDING events are never
-- deleted here). Rows another session holds are skipped, and a row whose
-- status changed meanwhile is re-checked under its lock. Returns how many
-- events it walked, the latest created_at among them (the next cursor), how
-- many it deleted, and how many of those created at that latest instant it
-- kept (the next step's $4 if the cursor moves, added to it if not).
--
-- Events of one transaction share their created_at (now() is the
-- transaction's start), so a cursor of created_at alone cannot walk past
-- a batch of them; outbox.retention_walk (migration 22) returns events of
-- one instant in the created_at index's order, which deleting others does
-- not change, so the ones kept are the first of their instant and the
-- offset walks past them.
WITH unhurried AS (
    -- This statement's commit does not wait for its WAL to reach the disk
    -- (synchronous_commit off for its own transaction): the stream's
    -- commits, which do, waited behind retention's flushes (the growth
    -- bench at 20,000,000 rows: IO/WALSync and LWLock/WALWrite waits while
    -- it deleted). A crash may undo its last few hundred milliseconds of
    -- deletes; the rows are SENT still, and a later pass deletes them again.
    SELECT pg_catalog.set_config('synchronous_commit', 'off', true)
), walked AS (
    SELECT w.id, w.created_at FROM outbox.retention_walk($1, $2, $3, $4) w
), doomed AS (
    -- source IS NULL: a status row of a mapped event with this event's id
    -- is that event's, never this one's (migration 23).
    SELECT w.id FROM walked w JOIN outbox.deliveries d ON d.event_id = w.id
    WHERE d.status = 'SENT' AND d.source IS NULL
    FOR UPDATE OF d SKIP LOCKED
), deleted AS (
    DELETE FROM outbox.events e USING doomed WHERE e.id = doomed.id RETURNING e.created_at
), latest AS (
    SELECT max(created_at) AS at FROM walked
)
SELECT (SELECT count(*) FROM walked), latest.at, (SELECT count(*) FROM deleted),
       (SELECT count(*) FROM walked WHERE created_at = latest.at) - (SELECT count(*) FROM deleted WHERE created_at = latest.at)
FROM unhurried, latest
