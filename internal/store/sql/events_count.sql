-- Counts the status rows of the event list's filter when it is only a
-- status ($1) and a reason ($2; NULL: any), up to $3: from
-- deliveries_status_idx or deliveries_reason_idx (indexes.sql) alone.
-- SENT rows, most of the table, are counted only with a reason.
SELECT count(*) FROM (
    SELECT 1 FROM outbox.deliveries d
    WHERE ($1::text IS NULL OR d.status = $1)
      AND ($2::text IS NULL OR d.failure_reason = $2)
    LIMIT $3) c
