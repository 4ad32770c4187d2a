-- outbox.held_keys, longest held first. $1: topic (NULL: all); $2: limit.
SELECT topic, key, blocking_event_id::text, status, coalesce(failure_reason, ''), coalesce(last_error, ''),
       attempts, since, queued
FROM outbox.held_keys
WHERE $1::text IS NULL OR topic = $1
ORDER BY since, topic, key
LIMIT $2
