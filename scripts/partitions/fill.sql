-- Rows :from to :to of :n events and status rows, as the growth bench's
-- fill writes them (cmd/outbox-bench/growth.go): created_at spread over 7
-- days less an hour, version-7 ids of that time, ~500-byte payloads, one in
-- :failed_every FAILED (MESSAGE_TOO_LARGE, as the relay writes it; 0: none),
-- the rest SENT.
SET synchronous_commit = off;
WITH ev AS (
    INSERT INTO proto.events (id, topic, key, payload, event_type, created_at)
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                  PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
           'bench', 'customer-' || (i % 1000),
           jsonb_build_object('order_id', i, 'customer', 'customer-' || (i % 1000),
                              'amount', round((random() * 1000)::numeric, 2), 'currency', 'EUR', 'note', repeat('x', 380)),
           'order.created', at
    FROM generate_series(:from::int, :to::int) i,
         LATERAL (SELECT :'start'::timestamptz + i * make_interval(secs => 601200.0 / (:n::int + 1))) AS t(at)
    RETURNING id, topic, key, created_at, seq)
INSERT INTO proto.deliveries (event_id, status, attempts, next_attempt_at, kafka_partition, kafka_offset,
                              created_at, updated_at, sent_at, retry_policy, seq,
                              failure_reason, last_error, topic, key, commit_lsn, tx_position)
SELECT id, CASE WHEN f THEN 'FAILED' ELSE 'SENT' END, 1, created_at,
       CASE WHEN NOT f THEN seq % 3 END, CASE WHEN NOT f THEN seq END,
       created_at, created_at, CASE WHEN NOT f THEN created_at END,
       '{"max_attempts":10,"initial_interval":"1s","max_interval":"5m","multiplier":2}'::jsonb, seq,
       CASE WHEN f THEN 'MESSAGE_TOO_LARGE' END, CASE WHEN f THEN 'kafka: message was too large' END,
       CASE WHEN f THEN topic END, CASE WHEN f THEN key END, CASE WHEN f THEN '0/0'::pg_lsn END, CASE WHEN f THEN 0 END
FROM ev, LATERAL (SELECT :failed_every::int > 0 AND seq % greatest(:failed_every::int, 1) = 0) AS x(f)
ORDER BY created_at;
