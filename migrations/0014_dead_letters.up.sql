-- The dead-letter topic (--dead-letter-topic): every failure of an event
-- is also published there once; the status row says how that went. The
-- row stays the truth: a resend works as before, and a failure after it
-- is published again.
ALTER TABLE outbox.deliveries
    ADD COLUMN dead_letter_status text CHECK (dead_letter_status IN ('SENT', 'FAILED')),
    ADD COLUMN dead_lettered_at   timestamptz,
    ADD COLUMN dead_letter_error  text,
    -- A relay publishing the row's dead letter holds it until then.
    ADD COLUMN dead_letter_lease  timestamptz;

COMMENT ON COLUMN outbox.deliveries.dead_letter_status IS
    'the last failure on the dead-letter topic: SENT, or FAILED (the topic refused it: dead_letter_error says why); NULL: not published there';

-- When the relay first ran with each dead-letter topic: failures from
-- before are not published there.
CREATE TABLE outbox.dead_letter_topics (
    topic text        PRIMARY KEY,
    since timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE VIEW outbox.failed_events AS
SELECT e.id AS event_id, e.topic, e.key, e.event_type, e.created_at,
       d.failure_reason, d.last_error, d.attempts, d.max_attempts,
       d.updated_at AS failed_at, d.created_at AS first_attempt_at, e.source,
       d.dead_letter_status, d.dead_lettered_at, d.dead_letter_error
FROM outbox.deliveries d JOIN outbox.relayed_events e ON e.id = d.event_id
WHERE d.status = 'FAILED';
