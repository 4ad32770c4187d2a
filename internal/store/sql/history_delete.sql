-- Deletes the per-minute counts of minutes before $1, and the per-hour
-- counts of hours that ended before it (--history-retention).
WITH minutes AS (DELETE FROM outbox.delivery_minutes m WHERE m.minute < $1 RETURNING 1),
hours AS (DELETE FROM outbox.delivery_hours h WHERE h.hour < $1 - interval '1 hour' RETURNING 1)
SELECT (SELECT count(*) FROM minutes) + (SELECT count(*) FROM hours)
