-- Which of these events already have a status row: replayed after a
-- restart, or owned by the poller. The stream publishes none of them whose
-- row is of the same source (NULL, returned as '': outbox.events; else the
-- mapped table): an event of outbox.events can have a mapped event's id
-- (migration 23), and that row is not the other's.
SELECT event_id, coalesce(source, '') FROM outbox.deliveries WHERE event_id = ANY($1::uuid[])
