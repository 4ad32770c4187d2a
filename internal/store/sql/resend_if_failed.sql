-- outbox.resend($1) if the event is still FAILED (a page that showed it
-- FAILED changes nothing once someone else has resent or skipped it), and
-- the event's status before ('' when it has no status row).
WITH d AS (SELECT d.event_id, d.status FROM outbox.deliveries d WHERE d.event_id = $1::uuid FOR UPDATE),
r AS (SELECT outbox.resend(d.event_id) AS resent FROM d WHERE d.status = 'FAILED')
SELECT coalesce((SELECT resent FROM r), false), coalesce((SELECT status FROM d), '')
