-- failed_count.sql with an event type ($2), a key ($6) or a text the last
-- error contains ($7) (NULL: any), filters no index of the FAILED rows
-- reads: the count walks the newest $8 FAILED rows matching the other
-- filters (NULL: all) and counts those matching these among them; then how
-- many it walked (when $8, more may be older).
-- The event is read only for what the status row lacks: its type when
-- asked, its key when the status row has none (a search by key or error
-- text reads no event: the 10,000 lookups were most of its time).
SELECT count(*) FILTER (WHERE ($7::text IS NULL OR pg_catalog.strpos(d.last_error, $7) > 0)
                          AND ($6::text IS NULL OR coalesce(d.key, (SELECT r.key FROM outbox.relayed_events r
                                                                     WHERE r.id = d.event_id LIMIT 1)) = $6)
                          AND ($2::text IS NULL OR (SELECT r.event_type FROM outbox.relayed_events r
                                                     WHERE r.id = d.event_id LIMIT 1) = $2)), count(*)
FROM (SELECT d.event_id, d.key, d.last_error FROM outbox.deliveries d
      WHERE d.status = 'FAILED'
        AND ($1::text IS NULL OR d.topic = $1)
        AND ($3::text IS NULL OR d.failure_reason = $3)
        AND ($4::timestamptz IS NULL OR d.updated_at >= $4)
        AND ($5::timestamptz IS NULL OR d.updated_at < $5)
      ORDER BY d.updated_at DESC, d.event_id DESC
      LIMIT $8) d
