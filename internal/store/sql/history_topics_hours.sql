-- Events delivered and failed per topic from hour $1 on, the busiest
-- first: for a day (a row a topic and hour).
SELECT h.topic, sum(h.delivered)::bigint AS delivered, sum(h.failed)::bigint AS failed
FROM outbox.delivery_hours h
WHERE h.hour >= $1
GROUP BY h.topic ORDER BY sum(h.delivered) + sum(h.failed) DESC, h.topic
