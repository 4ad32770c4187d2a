-- The events $1 (a backfill page's ids), in that order, each with its
-- place in $1 (from 1), whether it has a status row by now (someone else
-- owns it) and its columns in binary format (the layout that serves the
-- stream reads them). Events deleted since the page was read are left out.
-- Each is read by primary key. The LIMITs keep the planner from pulling the
-- LATERAL subqueries up into plain joins: it then hashed all of
-- outbox.deliveries, which the backfill itself fills, for every page (170
-- ms for a page of 5,000 against 500,000 rows, 12 ms with the probes).
SELECT u.n AS relay_n, d.found IS NOT NULL AS relay_has_row, e.*
FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
CROSS JOIN LATERAL (SELECT e.* FROM outbox.events e WHERE e.id = u.id LIMIT 1) e
LEFT JOIN LATERAL (SELECT true AS found FROM outbox.deliveries d WHERE d.event_id = u.id LIMIT 1) d ON true
ORDER BY u.n
