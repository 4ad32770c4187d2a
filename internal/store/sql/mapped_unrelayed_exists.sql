-- Whether a mapped table (TABLE, its id column ID) has a row without a
-- status row that the backfill of a new slot will give one
-- (mapped_unrelayed.sql: outbox_created_at at or after $2), as the
-- snapshot of the transaction it runs in sees it. $1: the table's name
-- (schema.table).
SELECT EXISTS (
    SELECT 1 FROM TABLE e
    WHERE e.outbox_seq IS NOT NULL AND e.outbox_created_at >= $2
      AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = outbox.event_id($1, e.ID::text)))
