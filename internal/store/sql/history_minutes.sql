-- Events delivered and failed per minute, every topic summed, from minute
-- $1 on, oldest first (the primary key's range).
SELECT m.minute, sum(m.delivered)::bigint, sum(m.failed)::bigint
FROM outbox.delivery_minutes m
WHERE m.minute >= $1
GROUP BY m.minute ORDER BY m.minute
