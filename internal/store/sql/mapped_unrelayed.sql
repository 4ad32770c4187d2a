-- The rows of a mapped table (TABLE, its id column ID; mapped_tables.go
-- puts in their quoted names) without a status row, for the backfill of a
-- new slot, the gap sweep and poll mode: rows whose outbox_created_at lies
-- in [$1, $2) and whose (outbox_created_at, outbox_seq) comes after ($1,
-- $3), in that order, at most $5, each with its order columns and then
-- every column in binary format (the mapping reads them as it reads the
-- stream's). $4: the table's name (schema.table), as status rows know it.
--
-- The order is the one outbox.events' sweep walks (sweep.sql): per key,
-- what one page holds is a prefix of what the walk finds. Rows without an
-- outbox_seq were written before the table had one: taken as relayed by
-- whatever relayed the table before. One probe of outbox.deliveries' primary
-- key per row, by the id outbox.event_id gives it (the stream's).
SELECT e.outbox_created_at AS relay_created_at, e.outbox_seq AS relay_seq, e.*
FROM TABLE e
WHERE e.outbox_seq IS NOT NULL AND e.outbox_created_at >= $1 AND e.outbox_created_at < $2
  AND (e.outbox_created_at, e.outbox_seq) > ($1, $3)
  AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = outbox.event_id($4, e.ID::text))
ORDER BY e.outbox_created_at, e.outbox_seq
LIMIT $5
