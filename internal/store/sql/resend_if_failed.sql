-- outbox.resend_if_failed($1): outbox.resend($1) if the event is still
-- FAILED, and the event's status before ('' when it has no status row).
SELECT resent, status FROM outbox.resend_if_failed($1::uuid)
