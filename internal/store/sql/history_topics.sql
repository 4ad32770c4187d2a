-- Events delivered and failed per topic from minute $1 on (not '(all)'),
-- the busiest first: for the last hour or so (a row a topic and minute).
SELECT m.topic, sum(m.delivered)::bigint AS delivered, sum(m.failed)::bigint AS failed
FROM outbox.delivery_minutes m
WHERE m.minute >= $1 AND m.topic <> '(all)'
GROUP BY m.topic ORDER BY sum(m.delivered) + sum(m.failed) DESC, m.topic
