-- The console's History (issue 44): how many events each relay recorded
-- SENT (delivered) and FAILED, per minute and topic. Every relay counts in
-- memory and adds its counts every few seconds with one upsert
-- (delivered = delivered + EXCLUDED.delivered), so several relays add up;
-- a few rows a minute, not a scan of outbox.deliveries. topic is the
-- metrics' label: a topic's name, or '(other)' past --metrics-max-topics
-- and '(refused)' for events never sent to a topic of their own. Rows
-- older than --history-retention are deleted by the relays. The relay
-- writes it (outbox_relay: SELECT, INSERT, UPDATE, DELETE); operators and
-- the console read it.
CREATE TABLE outbox.delivery_minutes (
    minute    timestamptz NOT NULL,
    topic     text        NOT NULL,
    delivered bigint      NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    failed    bigint      NOT NULL DEFAULT 0 CHECK (failed >= 0),
    PRIMARY KEY (minute, topic)
);

-- One topic's minutes (the History page filtered by ?topic=) without
-- reading every topic's.
CREATE INDEX delivery_minutes_topic_idx ON outbox.delivery_minutes (topic, minute);

COMMENT ON TABLE outbox.delivery_minutes IS
    'events recorded SENT (delivered) and FAILED per minute and topic, added by every relay as it goes; kept for --history-retention';
