-- Pages through status rows for the console, newest event id first (the
-- default outbox.uuid_v7 ids are time-ordered), before event $1 (keyset;
-- NULL: from the newest), matching the filters (NULL: any): $2 status, $3
-- topic, $4 key (events_page_key.sql when given), $5 event type, $6
-- reason, $7 and $8 last change at or after and before. At most $9 rows,
-- from the newest $10 status rows that match $2 and $6 (each answered from
-- an index; events_walk_end.sql says where that walk ended): a filter on
-- topic, type or time that few rows match pages through the table in
-- bounded steps instead of reading it whole. Each row takes its event's
-- topic, key and type from outbox.relayed_events while the event is there,
-- else the status row's own (a mapped event delivered on its first try
-- keeps no record).
SELECT d.event_id::text, d.status, coalesce(e.topic, d.topic, ''), coalesce(e.key, d.key, ''),
       coalesce(e.event_type, ''), coalesce(d.failure_reason, ''), coalesce(d.last_error, ''), d.attempts,
       d.updated_at, coalesce(d.source, e.source, 'outbox.events')
FROM (SELECT * FROM outbox.deliveries d
      WHERE ($1::uuid IS NULL OR d.event_id < $1)
        AND ($2::text IS NULL OR d.status = $2)
        AND ($6::text IS NULL OR d.failure_reason = $6)
      ORDER BY d.event_id DESC
      LIMIT $10) d
LEFT JOIN LATERAL (SELECT r.topic, r.key, r.event_type, r.source FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1) e ON true
WHERE ($3::text IS NULL OR coalesce(e.topic, d.topic) = $3)
  AND ($4::text IS NULL OR coalesce(e.key, d.key) = $4)
  AND ($5::text IS NULL OR e.event_type = $5)
  AND ($7::timestamptz IS NULL OR d.updated_at >= $7)
  AND ($8::timestamptz IS NULL OR d.updated_at < $8)
ORDER BY d.event_id DESC
LIMIT $9
