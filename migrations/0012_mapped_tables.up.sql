-- Your own outbox table (--tables-config, --debezium-config): the relay
-- relays inserts into tables of any shape, mapped by configuration, and
-- keeps their status rows in outbox.deliveries like those of outbox.events.
--
-- outbox.mapped_events holds, for every event of a mapped table the stream
-- has seen, the Kafka record the mapping made of it. It is written by the
-- relay before the event's status row (in the same batches, one statement
-- per batch), so everything after the first try reads the copy, never the
-- application's table: a retry, a spill during a Kafka outage, a held key,
-- a resend from SQL. That is what lets an application delete its outbox
-- row in the transaction that wrote it (Debezium's recommended pattern):
-- the stream still sees the INSERT, and the copy is what is retried.
--
-- id is the status row's event_id: outbox.event_id(source, source_id), so
-- ids of any type (uuid, bigint, text) in any number of tables never meet.
-- The relay never writes to the application's table.
CREATE TABLE outbox.mapped_events (
    id             uuid        PRIMARY KEY,
    source         text        NOT NULL,  -- schema.table
    source_id      text        NOT NULL,  -- the id column's text
    topic          text,                  -- NULL: the row could not be mapped (its status row says why)
    key            text,                  -- the key column's text: the key of per-key order
    kafka_key      bytea,                 -- the record's key, as the key converter wrote it
    value          bytea,                 -- NULL: a tombstone
    headers        jsonb       NOT NULL DEFAULT '[]',  -- the record's headers in order: [[name, value], ...]
    event_type     text,
    created_at     timestamptz NOT NULL,  -- the record's timestamp
    copied_at      timestamptz NOT NULL DEFAULT now()
);
-- Retention and purge walk copies by age. Copies are written in commit
-- order, so a BRIN index serves the walk at almost no cost to the stream
-- (a B-tree on created_at cost the Debezium drain a sixth of its rate). A
-- copy is found by its table's id through its id: outbox.event_id().
CREATE INDEX mapped_events_created_at_idx ON outbox.mapped_events USING brin (created_at);

-- Deleting copies deletes their status rows, as deleting events does.
CREATE TRIGGER mapped_events_delete_deliveries
    AFTER DELETE ON outbox.mapped_events REFERENCING OLD TABLE AS deleted_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.delete_deliveries_of_deleted_events();

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
SELECT e.topic, d.status, count(*) AS events,
       max(now() - e.created_at) FILTER (WHERE d.status = 'PENDING') AS oldest_pending_age,
       max(d.updated_at) AS last_change, e.source
FROM outbox.deliveries d JOIN outbox.relayed_events e ON e.id = d.event_id
GROUP BY e.source, e.topic, d.status;

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
-- copies of mapped events (their status rows go with them; the
-- application's table is never touched).
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
            SELECT m.id FROM outbox.mapped_events m JOIN outbox.deliveries d ON d.event_id = m.id
            WHERE m.created_at < now() - purge.older_than AND d.status = purge.status
              AND (purge.topic IS NULL OR m.topic = purge.topic)
              AND (purge.event_type IS NULL OR m.event_type = purge.event_type)
              AND (purge.reason IS NULL OR d.failure_reason = purge.reason)
              AND (purge.since IS NULL OR m.created_at >= purge.since)
              AND (purge.until IS NULL OR m.created_at < purge.until)
            ORDER BY m.created_at
            LIMIT purge.batch - deleted
            FOR UPDATE OF d SKIP LOCKED
        )
        DELETE FROM outbox.mapped_events m USING doomed WHERE m.id = doomed.id;
        GET DIAGNOSTICS copies = ROW_COUNT;
        deleted := deleted + copies;
    END IF;
    RETURN deleted;
END $$;
