CREATE INDEX deliveries_failed_idx ON outbox.deliveries (updated_at) WHERE status = 'FAILED';
DROP INDEX IF EXISTS outbox.deliveries_failed_page_idx;
DROP VIEW IF EXISTS outbox.delivery_stats;
DROP VIEW IF EXISTS outbox.failed_events;
DROP FUNCTION IF EXISTS outbox.resend_failed(text, text, timestamptz, timestamptz, text);
DROP FUNCTION IF EXISTS outbox.resend(uuid);
ALTER TABLE outbox.deliveries ALTER COLUMN next_attempt_at DROP NOT NULL,
                              ALTER COLUMN next_attempt_at DROP DEFAULT;
ALTER TABLE outbox.deliveries DROP COLUMN IF EXISTS retry_policy, DROP COLUMN IF EXISTS max_attempts;
ALTER TABLE outbox.events DROP COLUMN IF EXISTS max_attempts;
