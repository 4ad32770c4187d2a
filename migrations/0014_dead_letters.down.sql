DROP VIEW outbox.failed_events;
CREATE VIEW outbox.failed_events AS
SELECT e.id AS event_id, e.topic, e.key, e.event_type, e.created_at,
       d.failure_reason, d.last_error, d.attempts, d.max_attempts,
       d.updated_at AS failed_at, d.created_at AS first_attempt_at, e.source
FROM outbox.deliveries d JOIN outbox.relayed_events e ON e.id = d.event_id
WHERE d.status = 'FAILED';
DROP TABLE outbox.dead_letter_topics;
DROP INDEX IF EXISTS outbox.deliveries_dead_letter_due_idx;
ALTER TABLE outbox.deliveries
    DROP COLUMN dead_letter_status,
    DROP COLUMN dead_lettered_at,
    DROP COLUMN dead_letter_error,
    DROP COLUMN dead_letter_lease;
