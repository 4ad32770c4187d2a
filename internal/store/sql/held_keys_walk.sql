-- The keys a held-key list walks: every key with unfinished status rows
-- ($1: of this topic; NULL: all) after ($2, $3) (topic, key; $2 NULL: from
-- the first), in (topic, key) order, each with its first unfinished row in
-- its key order: one index descent a key over deliveries_key_order_idx (a
-- loose index scan), instead of sorting every unfinished row (the
-- outbox.held_keys view). Followed by held_keys_page.sql or
-- held_keys_count.sql, which keep the held ones: the first row FAILED, or
-- waiting for a retry.
WITH RECURSIVE k AS (
    (SELECT d.topic, d.key, d.event_id, d.status, d.failure_reason, d.last_error, d.attempts, d.updated_at,
            d.seq, d.commit_lsn, d.tx_position
     FROM outbox.deliveries d
     WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED')
       AND d.topic >= coalesce($1::text, '') AND ($2::text IS NULL OR (d.topic, d.key) > ($2, $3::text))
     ORDER BY d.topic, d.key, d.seq, d.commit_lsn, d.tx_position, d.event_id LIMIT 1)
    UNION ALL
    SELECT n.* FROM k CROSS JOIN LATERAL (
        SELECT d.topic, d.key, d.event_id, d.status, d.failure_reason, d.last_error, d.attempts, d.updated_at,
               d.seq, d.commit_lsn, d.tx_position
        FROM outbox.deliveries d
        WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (d.topic, d.key) > (k.topic, k.key)
        ORDER BY d.topic, d.key, d.seq, d.commit_lsn, d.tx_position, d.event_id LIMIT 1) n
    WHERE $1::text IS NULL OR k.topic = $1
), held AS (
    SELECT * FROM k WHERE (k.status = 'FAILED' OR k.attempts > 0) AND ($1::text IS NULL OR k.topic = $1)
)
