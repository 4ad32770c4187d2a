-- The outbox contract: applications INSERT into outbox.events inside their
-- business transaction; the relay records delivery in outbox.deliveries.

CREATE TABLE outbox.events (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    topic      text        NOT NULL,
    key        text,
    payload    jsonb       NOT NULL,
    headers    jsonb,
    event_type text,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Walked by the poller's gap sweep over a bounded time window.
CREATE INDEX events_created_at_idx ON outbox.events (created_at);

CREATE TABLE outbox.deliveries (
    event_id        uuid        PRIMARY KEY REFERENCES outbox.events (id) ON DELETE CASCADE,
    status          text        NOT NULL
                    CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error      text,
    failure_reason  text,
    next_attempt_at timestamptz,
    locked_by       text,
    locked_at       timestamptz,
    kafka_partition integer,
    kafka_offset    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- Due rows for the poller, oldest first.
CREATE INDEX deliveries_pending_due_idx ON outbox.deliveries (next_attempt_at)
    WHERE status = 'PENDING';
-- Rows whose relay may have died.
CREATE INDEX deliveries_processing_locked_idx ON outbox.deliveries (locked_at)
    WHERE status = 'PROCESSING';
-- Failed rows, newest first, for operators.
CREATE INDEX deliveries_failed_idx ON outbox.deliveries (updated_at)
    WHERE status = 'FAILED';

-- The relay streams inserts only: updates and deletes of outbox rows are not events.
CREATE PUBLICATION outbox_relay FOR TABLE outbox.events WITH (publish = 'insert');
