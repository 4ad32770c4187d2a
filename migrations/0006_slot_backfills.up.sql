-- The backfill of each slot the relay creates: the events committed before
-- the slot's consistent point are not in its stream, so they get PENDING
-- rows from the snapshot the slot exported. A row whose backfill never
-- finished (the relay stopped) makes the next start drop the slot and
-- create it again, so no event is left without a row.
CREATE TABLE outbox.slot_backfills (
    slot_name   text        PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    events      bigint
);
