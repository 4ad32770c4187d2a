-- Which of these events already have a status row: replayed after a
-- restart, or owned by the poller. The stream publishes none of them.
SELECT event_id FROM outbox.deliveries WHERE event_id = ANY($1::uuid[])
