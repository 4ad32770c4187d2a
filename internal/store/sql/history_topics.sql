-- Events delivered and failed per topic from minute $1 on, the busiest
-- first.
SELECT m.topic, sum(m.delivered)::bigint AS delivered, sum(m.failed)::bigint AS failed
FROM outbox.delivery_minutes m
WHERE m.minute >= $1
GROUP BY m.topic ORDER BY sum(m.delivered) + sum(m.failed) DESC, m.topic
