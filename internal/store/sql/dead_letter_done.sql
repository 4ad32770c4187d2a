-- Records what became of dead letters, only on rows still FAILED with the
-- failure that was published (updated_at unchanged: a resend and a new
-- failure since are published again). Status SENT or FAILED (the topic
-- refused it, $3 says why) marks the failure published; '' (Kafka was not
-- available) leaves it to be tried again once the lease, set to now + $5
-- ms, ends.
--
-- $1: event ids; $2: statuses; $3: errors; $4: failures' updated_at; $5:
-- the wait before another try, in ms; $6: now.
UPDATE outbox.deliveries d
SET dead_letter_status = CASE WHEN u.status = '' THEN d.dead_letter_status ELSE u.status END,
    dead_letter_error = CASE WHEN u.status = '' THEN d.dead_letter_error ELSE NULLIF(u.err, '') END,
    dead_lettered_at = CASE WHEN u.status = '' THEN d.dead_lettered_at
                            ELSE greatest(coalesce($6::timestamptz, now()), d.updated_at) END,
    dead_letter_lease = CASE WHEN u.status = '' THEN coalesce($6::timestamptz, now()) + $5 * interval '1 millisecond' END
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS u(id, status, err, failed_at)
WHERE d.event_id = u.id AND d.status = 'FAILED' AND d.updated_at = u.failed_at
