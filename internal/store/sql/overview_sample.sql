-- The console overview's counts per table, topic and status from a sample
-- of outbox.deliveries: $1 percent of its pages (100: every row, an exact
-- count), the same pages at each refresh (REPEATABLE) so that figures move
-- with the table rather than with the draw. OverviewCounts scales them by
-- the table's rows over the rows sampled.
SELECT coalesce(d.source, 'outbox.events'),
       coalesce(d.topic, (SELECT r.topic FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1)),
       d.status, count(*)
FROM outbox.deliveries d TABLESAMPLE SYSTEM ($1) REPEATABLE (7)
GROUP BY 1, 2, 3
