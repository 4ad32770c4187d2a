-- (after held_keys_walk.sql) A page of held keys: at most $4, each with
-- how many events queue behind its blocking one (counted up to $5).
SELECT h.topic, h.key, h.event_id::text, h.status, coalesce(h.failure_reason, ''), coalesce(h.last_error, ''),
       h.attempts, h.updated_at,
       (SELECT count(*) FROM (SELECT 1 FROM outbox.deliveries q
                              WHERE q.key IS NOT NULL AND q.status IN ('PENDING', 'PROCESSING', 'FAILED')
                                AND q.topic = h.topic AND q.key = h.key
                                AND (q.seq, q.commit_lsn, q.tx_position, q.event_id) > (h.seq, h.commit_lsn, h.tx_position, h.event_id)
                              LIMIT $5) c)
FROM (SELECT * FROM held LIMIT $4) h
