-- Status rows of mapped events SENT on their first try. No copy is kept of
-- them (0012_mapped_tables.up.sql): their rows carry their table and topic
-- themselves, and they hold no key order. A row that exists already (the
-- gap between a replay and its status) is left alone. Runs in the batch of
-- insert_outcomes.sql or insert_sent.sql, in their transaction.
--
-- $1..$7: the mapped SENT outcomes in column form (mapped.go); $8: retry
-- policy; $9: now.
INSERT INTO outbox.deliveries
    (event_id, status, attempts, next_attempt_at, kafka_partition, kafka_offset, sent_at, max_attempts,
     retry_policy, seq, source, topic)
SELECT u.id, 'SENT', u.attempts, coalesce($9::timestamptz, now()), NULLIF(u.part, -1), NULLIF(u.off, -1),
       coalesce($9::timestamptz, now()), u.max_attempts, $8::jsonb, 0, u.source, u.topic
FROM unnest($1::uuid[], $2::int[], $3::int[], $4::bigint[], $5::int[], $6::text[], $7::text[])
     AS u(id, attempts, part, off, max_attempts, source, topic)
ON CONFLICT (event_id) DO NOTHING
