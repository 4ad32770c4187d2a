-- The greatest event id with a status row (uuids compare as their 16 bytes;
-- PostgreSQL 15 has no max(uuid), the primary key answers this). An event
-- with a greater id had no row then.
SELECT event_id FROM outbox.deliveries ORDER BY event_id DESC LIMIT 1
