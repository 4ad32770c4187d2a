-- The console overview's exact counts of the rows that are not SENT
-- (PENDING, PROCESSING, FAILED, SKIPPED) per table, topic and status, each
-- (status, topic) counted up to $1 rows: so every topic with such rows is
-- listed, whatever the others hold, and a backlog of millions costs no
-- more than $1 rows a topic. The topics of each status are walked one
-- index descent each (a loose index scan over deliveries_status_topic_idx,
-- indexes.sql). Such rows carry their topic (version 8); rows without one
-- (an event that could not be mapped to a topic, or rows from before) are
-- counted apart (deliveries_no_topic_idx), up to $1 a status, with their
-- event's topic when it has one.
--
-- Each step of the walk reads the table's row too (attempts is not in the
-- index): a plain index scan marks the entries of rows no longer there as
-- dead as it passes them, so that after a mass skip, before any vacuum,
-- only the first overview steps over them (an index-only scan would at
-- every refresh).
WITH RECURSIVE t AS (
    SELECT s.status, (SELECT d.topic FROM outbox.deliveries d
                      WHERE d.status <> 'SENT' AND d.status = s.status AND d.topic IS NOT NULL AND d.attempts >= 0
                      ORDER BY d.topic LIMIT 1) AS topic
    FROM (VALUES ('PENDING'), ('PROCESSING'), ('FAILED'), ('SKIPPED')) s (status)
    UNION ALL
    SELECT t.status, (SELECT d.topic FROM outbox.deliveries d
                      WHERE d.status <> 'SENT' AND d.status = t.status AND d.topic > t.topic AND d.attempts >= 0
                      ORDER BY d.topic LIMIT 1)
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
       (SELECT r.topic FROM outbox.relayed_events r WHERE r.id = c.event_id LIMIT 1), c.status, count(*)
FROM ((SELECT d.status, d.source, d.event_id FROM outbox.deliveries d WHERE d.status = 'PENDING' AND d.topic IS NULL AND d.status <> 'SENT' LIMIT $1)
      UNION ALL
      (SELECT d.status, d.source, d.event_id FROM outbox.deliveries d WHERE d.status = 'PROCESSING' AND d.topic IS NULL AND d.status <> 'SENT' LIMIT $1)
      UNION ALL
      (SELECT d.status, d.source, d.event_id FROM outbox.deliveries d WHERE d.status = 'FAILED' AND d.topic IS NULL AND d.status <> 'SENT' LIMIT $1)
      UNION ALL
      (SELECT d.status, d.source, d.event_id FROM outbox.deliveries d WHERE d.status = 'SKIPPED' AND d.topic IS NULL AND d.status <> 'SENT' LIMIT $1)) c
GROUP BY 1, 2, 3
