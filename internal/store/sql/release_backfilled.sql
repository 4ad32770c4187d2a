-- Makes due the rows the stream queued behind a new slot's backfill
-- (next_attempt_at 'infinity', insert_outcomes.sql) once no backfill is
-- running: by then every event a backfill found has its row, earlier in key
-- order than these, so the claim takes those first. A backfill that never
-- finishes (its slot was dropped while the relay was down and the relay
-- never started again) keeps them waiting: outbox.slot_backfills shows it,
-- and deleting its row releases them.
--
-- $1: at most this many rows; $2: now.
WITH waiting AS (
    SELECT event_id FROM outbox.deliveries
    WHERE status = 'PENDING' AND next_attempt_at = 'infinity'
      AND NOT EXISTS (SELECT 1 FROM outbox.slot_backfills WHERE finished_at IS NULL)
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox.deliveries d
SET next_attempt_at = coalesce($2::timestamptz, now()), updated_at = coalesce($2::timestamptz, now())
FROM waiting
WHERE d.event_id = waiting.event_id
