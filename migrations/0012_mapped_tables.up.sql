-- Your own outbox table (--tables-config, --debezium-config): the relay
-- relays inserts into tables of any shape, mapped by configuration, and
-- keeps their status rows in outbox.deliveries like those of outbox.events.
--
-- A mapped event's status row carries its table (source) and topic. Its id
-- is outbox.event_id(source, the id's text), so ids of any type (uuid,
-- bigint, text) in any number of tables never meet. The relay never writes
-- to the application's table.
--
-- outbox.mapped_events keeps the Kafka record of every mapped event that
-- was not delivered on its first try (queued in a Kafka outage, behind a
-- held key, waiting for a retry, FAILED), written by the relay in the same
-- transaction as its status row. Everything after the first try reads the
-- copy, never the application's table, which lets an application delete
-- its outbox row in the transaction that wrote it (Debezium's recommended
-- pattern): the stream still sees the INSERT, and the copy is what is
-- retried and resent. An event delivered on its first try keeps no copy:
-- writing one for every event halved the rate of the stream.
ALTER TABLE outbox.deliveries ADD COLUMN source text;
COMMENT ON COLUMN outbox.deliveries.source IS
    'the mapped table (schema.table) of the event; NULL: outbox.events';
-- Retention and purge walk the status rows of mapped events by age; rows of
-- outbox.events are not in this index and pay nothing for it.
CREATE INDEX deliveries_mapped_created_at_idx ON outbox.deliveries (created_at) WHERE source IS NOT NULL;

CREATE TABLE outbox.mapped_events (
    id             uuid        PRIMARY KEY,
    source         text        NOT NULL,  -- schema.table
    source_id      text        NOT NULL,  -- the id column's text
    topic          text,                  -- NULL: the row could not be mapped (its status row says why)
    key            text,                  -- the record's key as the key converter wrote it (UTF-8 text: the relay
                                          -- refuses other keys), also the key of per-key order
    value          bytea,                 -- NULL: a tombstone
    headers        jsonb       NOT NULL DEFAULT '[]',  -- the record's headers in order: [[name, value], ...]
    event_type     text,
    partition      integer,               -- the partition a column placed it on; NULL: by key
    created_at     timestamptz NOT NULL,  -- the record's timestamp
    copied_at      timestamptz NOT NULL DEFAULT now()
);
-- A copy is found by its table's id through its id: outbox.event_id().
-- Copies go with their status rows (retention, purge).

-- The status row id of event p_id of table p_source ('schema.table'): the
-- first 16 bytes of SHA-256 over the name, a zero byte and the id's text,
-- marked as a version 8 UUID (mapping.EventID computes the same).
CREATE FUNCTION outbox.event_id(p_source text, p_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT encode(set_byte(set_byte(h, 6, (get_byte(h, 6) & 15) | 128), 8, (get_byte(h, 8) & 63) | 128), 'hex')::uuid
    FROM (SELECT substring(sha256(convert_to(p_source, 'UTF8') || '\x00'::bytea || convert_to(p_id, 'UTF8')) FROM 1 FOR 16) AS h) s;
$$;

-- Every event the relay knows, from outbox.events and from mapped tables.
CREATE VIEW outbox.relayed_events AS
SELECT e.id, 'outbox.events'::text AS source, e.id::text AS source_id, e.topic, e.key, e.event_type,
       e.created_at, e.max_attempts, e.seq
FROM outbox.events e
UNION ALL
SELECT m.id, m.source, m.source_id, m.topic, m.key, m.event_type, m.created_at, NULL::int, 0::bigint
FROM outbox.mapped_events m;

-- Resend one event, of outbox.events or of a mapped table.
CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, topic, key, max_attempts, seq FROM outbox.relayed_events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d
            (event_id, status, attempts, next_attempt_at, max_attempts, topic, key, commit_lsn, tx_position, seq)
        SELECT ev.id, 'PENDING', 0, now(), ev.max_attempts, ev.topic, ev.key, '0/0', 0, coalesce(ev.seq, 0) FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

-- Resend an event of a mapped table by the table's own id:
-- SELECT outbox.resend('public.outbox', '42').
CREATE FUNCTION outbox.resend(p_source text, p_id text) RETURNS boolean
LANGUAGE sql AS $$ SELECT outbox.resend(outbox.event_id(p_source, p_id)) $$;

-- The failed events view and the counts, over every relayed table, with
-- the table last.
CREATE OR REPLACE VIEW outbox.failed_events AS
SELECT e.id AS event_id, e.topic, e.key, e.event_type, e.created_at,
       d.failure_reason, d.last_error, d.attempts, d.max_attempts,
       d.updated_at AS failed_at, d.created_at AS first_attempt_at, e.source
FROM outbox.deliveries d JOIN outbox.relayed_events e ON e.id = d.event_id
WHERE d.status = 'FAILED';

CREATE OR REPLACE VIEW outbox.delivery_stats AS
SELECT coalesce(e.topic, d.topic) AS topic, d.status, count(*) AS events,
       max(now() - coalesce(e.created_at, d.created_at)) FILTER (WHERE d.status = 'PENDING') AS oldest_pending_age,
       max(d.updated_at) AS last_change, coalesce(d.source, e.source) AS source
FROM outbox.deliveries d LEFT JOIN outbox.relayed_events e ON e.id = d.event_id
WHERE d.source IS NOT NULL OR e.id IS NOT NULL
GROUP BY coalesce(d.source, e.source), coalesce(e.topic, d.topic), d.status;

CREATE OR REPLACE FUNCTION outbox.resend_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_from         timestamptz DEFAULT NULL,
    p_to           timestamptz DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.relayed_events e
        WHERE e.id = d.event_id AND d.status = 'FAILED'
          AND (p_topic IS NULL OR e.topic = p_topic)
          AND (p_event_type IS NULL OR e.event_type = p_event_type)
          AND (p_from IS NULL OR e.created_at >= p_from)
          AND (p_to IS NULL OR e.created_at < p_to)
          AND (p_reason IS NULL OR d.failure_reason = p_reason)
          AND (p_failed_since IS NULL OR d.updated_at >= p_failed_since)
          AND (p_failed_until IS NULL OR d.updated_at < p_failed_until)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

CREATE OR REPLACE FUNCTION outbox.skip_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'SKIPPED', locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.relayed_events e
        WHERE e.id = d.event_id AND d.status = 'FAILED'
          AND (p_topic IS NULL OR e.topic = p_topic)
          AND (p_event_type IS NULL OR e.event_type = p_event_type)
          AND (p_reason IS NULL OR d.failure_reason = p_reason)
          AND (p_failed_since IS NULL OR d.updated_at >= p_failed_since)
          AND (p_failed_until IS NULL OR d.updated_at < p_failed_until)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

-- purge: events of outbox.events first, then, in what the batch leaves,
-- status rows of mapped events with their copies (the application's table
-- is never touched).
CREATE OR REPLACE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
                                        topic text DEFAULT NULL, event_type text DEFAULT NULL, reason text DEFAULT NULL,
                                        since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    deleted bigint;
    copies bigint;
BEGIN
    IF purge.status IS NULL OR purge.status NOT IN ('SENT', 'FAILED', 'SKIPPED') THEN
        RAISE EXCEPTION 'outbox.purge: status must be SENT, FAILED or SKIPPED, not %', purge.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF purge.batch IS NULL OR purge.batch < 1 THEN
        RAISE EXCEPTION 'outbox.purge: batch must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH doomed AS (
        SELECT e.id FROM outbox.events e JOIN outbox.deliveries d ON d.event_id = e.id
        WHERE e.created_at < now() - purge.older_than AND d.status = purge.status
          AND (purge.topic IS NULL OR e.topic = purge.topic)
          AND (purge.event_type IS NULL OR e.event_type = purge.event_type)
          AND (purge.reason IS NULL OR d.failure_reason = purge.reason)
          AND (purge.since IS NULL OR e.created_at >= purge.since)
          AND (purge.until IS NULL OR e.created_at < purge.until)
        ORDER BY e.created_at
        LIMIT purge.batch
        FOR UPDATE OF d SKIP LOCKED
    )
    DELETE FROM outbox.events e USING doomed WHERE e.id = doomed.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    IF deleted < purge.batch THEN
        WITH doomed AS (
            SELECT d.event_id FROM outbox.deliveries d LEFT JOIN outbox.mapped_events m ON m.id = d.event_id
            WHERE d.source IS NOT NULL AND d.created_at < now() - purge.older_than AND d.status = purge.status
              AND (purge.topic IS NULL OR coalesce(m.topic, d.topic) = purge.topic)
              AND (purge.event_type IS NULL OR m.event_type = purge.event_type)
              AND (purge.reason IS NULL OR d.failure_reason = purge.reason)
              AND (purge.since IS NULL OR d.created_at >= purge.since)
              AND (purge.until IS NULL OR d.created_at < purge.until)
            ORDER BY d.created_at
            LIMIT purge.batch - deleted
            FOR UPDATE OF d SKIP LOCKED
        ), copies AS (
            DELETE FROM outbox.mapped_events m USING doomed WHERE m.id = doomed.event_id
        )
        DELETE FROM outbox.deliveries d USING doomed WHERE d.event_id = doomed.event_id;
        GET DIAGNOSTICS copies = ROW_COUNT;
        deleted := deleted + copies;
    END IF;
    RETURN deleted;
END $$;
