-- A key's unfinished status rows (topic $1, key $2) in the order the relay
-- delivers them (deliveries_key_order_idx): the first one is the one the
-- others wait for when it is held. At most $3.
SELECT d.event_id::text, d.status, d.topic, d.key, coalesce(d.failure_reason, ''), coalesce(d.last_error, ''), d.attempts,
       d.updated_at
FROM outbox.deliveries d
WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED') AND d.topic = $1 AND d.key = $2
ORDER BY d.seq, d.commit_lsn, d.tx_position, d.event_id
LIMIT $3
