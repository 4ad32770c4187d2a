-- events_page.sql for a key ($4): the key's events, newest first, from
-- outbox.events and the kept records of mapped tables (their key indexes,
-- indexes.sql), each with its status row; the same parameters. The walk is
-- of the key's newest $10 events before $1 (events_key_walk_end.sql says
-- where it ended). A mapped event delivered on its first try keeps no
-- record, so no key: a key lookup does not find it.
SELECT d.event_id::text, d.status, coalesce(e.topic, d.topic, ''), coalesce(e.key, d.key, ''),
       coalesce(e.event_type, ''), coalesce(d.failure_reason, ''), coalesce(d.last_error, ''), d.attempts,
       d.updated_at, coalesce(d.source, e.source)
FROM (SELECT * FROM ((SELECT x.id, x.topic, x.key, x.event_type, 'outbox.events' AS source FROM outbox.events x
                      WHERE x.key = $4 AND ($1::uuid IS NULL OR x.id < $1) ORDER BY x.id DESC LIMIT $10)
                     UNION ALL
                     (SELECT m.id, m.topic, m.key, m.event_type, m.source FROM outbox.mapped_events m
                      WHERE m.key = $4 AND ($1::uuid IS NULL OR m.id < $1) ORDER BY m.id DESC LIMIT $10)) u
      ORDER BY u.id DESC
      LIMIT $10) e
JOIN outbox.deliveries d ON d.event_id = e.id
WHERE ($2::text IS NULL OR d.status = $2)
  AND ($3::text IS NULL OR e.topic = $3)
  AND ($5::text IS NULL OR e.event_type = $5)
  AND ($6::text IS NULL OR d.failure_reason = $6)
  AND ($7::timestamptz IS NULL OR d.updated_at >= $7)
  AND ($8::timestamptz IS NULL OR d.updated_at < $8)
ORDER BY e.id DESC
LIMIT $9
