-- The next $2 events after id $1 without a status row, in the snapshot of
-- the transaction it runs in (the new slot's).
SELECT e.id FROM outbox.events e
WHERE e.id > $1 AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
ORDER BY e.id
LIMIT $2
