-- Events per table, topic and delivery status (outbox.delivery_stats):
-- outbox.events and each mapped table.
SELECT source, topic, status, events FROM outbox.delivery_stats ORDER BY source, topic, status
