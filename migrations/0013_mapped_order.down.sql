-- Back to version 12: copies without their insertion order.
CREATE OR REPLACE VIEW outbox.relayed_events AS
SELECT e.id, 'outbox.events'::text AS source, e.id::text AS source_id, e.topic, e.key, e.event_type,
       e.created_at, e.max_attempts, e.seq
FROM outbox.events e
UNION ALL
SELECT m.id, m.source, m.source_id, m.topic, m.key, m.event_type, m.created_at, NULL::int, 0::bigint
FROM outbox.mapped_events m;
ALTER TABLE outbox.mapped_events DROP COLUMN seq;
