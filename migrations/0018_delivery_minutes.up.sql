-- The console's History (issue 44): how many events each relay recorded
-- SENT (delivered) and FAILED, per minute and topic. Every relay counts in
-- memory and adds its counts every few seconds with one upsert
-- (delivered = delivered + EXCLUDED.delivered), so several relays add up;
-- a few rows a minute, not a scan of outbox.deliveries. topic is the
-- metrics' label: a topic's name, or '(other)' past --metrics-max-topics
-- and '(refused)' for events never sent to a topic of their own; '(all)'
-- is the minute's total over every topic (a chart of 24 hours reads 1,440
-- rows however many topics there are). outbox.delivery_hours holds the
-- same per hour and topic (without '(all)'): a day's totals per topic read
-- 24 rows a topic. Rows older than --history-retention are deleted by the
-- relays. The relay writes them (outbox_relay: SELECT, INSERT, UPDATE,
-- DELETE); operators and the console read them.
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

CREATE TABLE outbox.delivery_hours (
    hour      timestamptz NOT NULL,
    topic     text        NOT NULL,
    delivered bigint      NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    failed    bigint      NOT NULL DEFAULT 0 CHECK (failed >= 0),
    PRIMARY KEY (hour, topic)
);

COMMENT ON TABLE outbox.delivery_minutes IS
    'events recorded SENT (delivered) and FAILED per minute and topic (''(all)'': every topic), added by every relay as it goes; kept for --history-retention';
COMMENT ON TABLE outbox.delivery_hours IS
    'events recorded SENT (delivered) and FAILED per hour and topic, added by every relay as it goes; kept for --history-retention';
