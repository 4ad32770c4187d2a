-- Order columns for mapped tables (migrate --print shows what it adds to a
-- mapped table: outbox_created_at and outbox_seq, see internal/mapping).
-- A mapped table with them is read by the backfill of a new slot, the gap
-- sweep and poll mode like outbox.events; its events' key order is their
-- insertion order (outbox_seq) on every path, as for outbox.events (seq).
-- A copy keeps its event's outbox_seq so that a queued or retried event
-- keeps its place behind the earlier events of its key.
ALTER TABLE outbox.mapped_events ADD COLUMN seq bigint;
COMMENT ON COLUMN outbox.mapped_events.seq IS
    'the row''s outbox_seq (insertion order) when its table has one; NULL: none';

CREATE OR REPLACE VIEW outbox.relayed_events AS
SELECT e.id, 'outbox.events'::text AS source, e.id::text AS source_id, e.topic, e.key, e.event_type,
       e.created_at, e.max_attempts, e.seq
FROM outbox.events e
UNION ALL
SELECT m.id, m.source, m.source_id, m.topic, m.key, m.event_type, m.created_at, NULL::int, coalesce(m.seq, 0)
FROM outbox.mapped_events m;
