-- Where --retention's walks have got to (issue 46). A pass walks events by
-- created_at, oldest first; the events the last pass deleted stay in the
-- created_at index, dead, until a vacuum, and a pass that started from the
-- oldest event again walked all of them in its first statement (after a
-- backlog of 500,000, one statement of 162 ms that read 34,000 buffers,
-- which the stream's events waited behind). A pass goes on from walked_to,
-- where the last one ended, so a restart does too; it walks from the oldest
-- event again once full_walk_at is an hour old (relay/retention.go's
-- retentionFullEvery), for the events that were FAILED or PENDING when it
-- walked them and have been sent since. One row a walk: 'events' (the
-- events of outbox.events) and 'mapped' (the status rows of mapped events).
-- The relay that holds the retention lock writes them (outbox_relay:
-- SELECT, INSERT, UPDATE); deleting them costs one walk from the oldest.
CREATE TABLE outbox.retention_progress (
    walk         text        PRIMARY KEY CHECK (walk IN ('events', 'mapped')),
    walked_to    timestamptz NOT NULL,
    full_walk_at timestamptz NOT NULL
);

COMMENT ON TABLE outbox.retention_progress IS
    'where --retention''s walk over events (''events'') and mapped status rows (''mapped'') ended (walked_to) and when its last walk from the oldest event began (full_walk_at)';
