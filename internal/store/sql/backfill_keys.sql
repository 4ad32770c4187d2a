-- The keys of the events a new slot's backfill will give a row (events
-- without a status row, in the snapshot of the transaction it runs in), up
-- to $1 of them: the stream queues their new events until the backfill is
-- done, so that none overtakes an earlier one it has not reached yet.
-- Draining: their first events will be queued, due now.
SELECT DISTINCT e.topic, e.key, true AS draining FROM outbox.events e
WHERE e.key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
LIMIT $1
