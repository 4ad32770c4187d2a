-- Whether the backfill of a slot has started, not finished, and is still
-- going: its slot is in use. A backfill whose relay stopped (it starts over
-- from a new slot when the relay comes back) or whose slot is gone does not
-- count, so a backfill that can no longer finish never keeps the gap sweep
-- waiting.
SELECT EXISTS (
    SELECT 1 FROM outbox.slot_backfills b JOIN pg_replication_slots s ON s.slot_name = b.slot_name
    WHERE b.finished_at IS NULL AND s.active)
