-- Events per topic and delivery status (outbox.delivery_stats).
SELECT topic, status, events FROM outbox.delivery_stats ORDER BY topic, status
