-- The console overview's exact counts of the rows that are not SENT
-- (PENDING, PROCESSING, FAILED, SKIPPED) per table, topic and status, each
-- (status, topic) counted up to $1 rows: so every topic with such rows is
-- listed, whatever the others hold, and a backlog of millions costs no
-- more than $1 rows a topic. The topics of each status are walked one
-- index descent each (a loose index scan over deliveries_status_topic_idx,
-- indexes.sql). Such rows carry their topic (version 8); rows without one
-- (an event that could not be mapped to a topic, or rows from before) are
-- counted apart, up to $1 a status, with their event's topic when it has one.
WITH RECURSIVE t AS (
    SELECT s.status, (SELECT min(d.topic) FROM outbox.deliveries d
                      WHERE d.status <> 'SENT' AND d.status = s.status) AS topic
    FROM (VALUES ('PENDING'), ('PROCESSING'), ('FAILED'), ('SKIPPED')) s (status)
    UNION ALL
    SELECT t.status, (SELECT min(d.topic) FROM outbox.deliveries d
                      WHERE d.status <> 'SENT' AND d.status = t.status AND d.topic > t.topic)
    FROM t WHERE t.topic IS NOT NULL
)
SELECT coalesce(c.source, 'outbox.events'), t.topic, t.status, count(*)
FROM t CROSS JOIN LATERAL (
    SELECT d.source FROM outbox.deliveries d
    WHERE d.status <> 'SENT' AND d.status = t.status AND d.topic = t.topic
    LIMIT $1) c
WHERE t.topic IS NOT NULL
GROUP BY 1, 2, 3
UNION ALL
SELECT coalesce(c.source, 'outbox.events'),
       (SELECT r.topic FROM outbox.relayed_events r WHERE r.id = c.event_id LIMIT 1), s.status, count(*)
FROM (VALUES ('PENDING'), ('PROCESSING'), ('FAILED'), ('SKIPPED')) s (status)
CROSS JOIN LATERAL (
    SELECT d.source, d.event_id FROM outbox.deliveries d
    WHERE d.status <> 'SENT' AND d.status = s.status AND d.topic IS NULL
    LIMIT $1) c
GROUP BY 1, 2, 3
