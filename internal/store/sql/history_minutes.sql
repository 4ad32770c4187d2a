-- Events of topic $2 ('(all)': every topic) delivered and failed per
-- minute from minute $1 on, oldest first (delivery_minutes_topic_idx).
SELECT m.minute, m.delivered, m.failed
FROM outbox.delivery_minutes m
WHERE m.topic = $2 AND m.minute >= $1
ORDER BY m.minute
