-- One step of --retention: walks events by created_at from a cursor ($1) up
-- to a cut-off ($2), at most $3 of them, past the first $4 (the events
-- created at $1 that earlier steps walked and kept), and deletes the SENT
-- ones with their delivery rows (FAILED and PENDING events are never
-- deleted here). A status row whose status changed meanwhile is re-checked
-- as its DELETE takes it (a resend's PENDING is kept). Rows another session
-- holds: the step waits on them up to its lock_timeout, and the store, if
-- that runs out, takes the step again with $5 true, which locks the status
-- rows first (FOR UPDATE SKIP LOCKED) and skips the held ones. (An event's
-- row only its owner can hold, as a relay's role may not lock events: no
-- UPDATE on them, which FOR UPDATE needs even in a branch never run. Such a
-- lock, or a whole table's, a migration's, fails both; the next pass tries
-- again.) Returns how many
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
), locked AS (
    -- Only with $5 (never run without it). source IS NULL: a status row of
    -- a mapped event with this event's id is that event's, never this
    -- one's (migration 23).
    SELECT w.id FROM walked w JOIN outbox.deliveries d ON d.event_id = w.id
    WHERE $5 AND d.status = 'SENT' AND d.source IS NULL
    FOR UPDATE OF d SKIP LOCKED
), gone AS (
    -- The status rows first, each taken by its DELETE: a lock of its own
    -- before it (FOR UPDATE) wrote a WAL record a row more, and the events'
    -- trigger deleted them after (1,000 events deleted: 2,034 WAL records
    -- against 3,034, a sixth fewer bytes with lz4).
    DELETE FROM outbox.deliveries d USING walked w
    WHERE d.event_id = w.id AND d.status = 'SENT' AND d.source IS NULL
      AND (NOT $5 OR d.event_id IN (SELECT id FROM locked))
    RETURNING d.event_id
), deleted AS (
    DELETE FROM outbox.events e USING gone WHERE e.id = gone.event_id RETURNING e.created_at
), latest AS (
    SELECT max(created_at) AS at FROM walked
)
SELECT (SELECT count(*) FROM walked), latest.at, (SELECT count(*) FROM deleted),
       (SELECT count(*) FROM walked WHERE created_at = latest.at) - (SELECT count(*) FROM deleted WHERE created_at = latest.at)
FROM unhurried, latest
