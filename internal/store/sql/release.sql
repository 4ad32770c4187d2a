-- Hands back, uncounted, what this instance ($1) claimed but did not finish
-- (a graceful stop).
UPDATE outbox.deliveries SET status = 'PENDING', locked_by = NULL, locked_at = NULL, updated_at = now()
WHERE status = 'PROCESSING' AND locked_by = $1
