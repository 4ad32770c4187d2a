-- The events $1 (a backfill page's ids), in that order, each with its
-- place in $1 (from 1), whether it has a status row by now (someone else
-- owns it) and its columns in binary format (the layout that serves the
-- stream reads them). Events deleted since the page was read are left out.
-- Each is read by primary key (LATERAL: no plan that walks either table).
SELECT u.n AS relay_n, d.found IS NOT NULL AS relay_has_row, e.*
FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
CROSS JOIN LATERAL (SELECT e.* FROM outbox.events e WHERE e.id = u.id) e
LEFT JOIN LATERAL (SELECT true AS found FROM outbox.deliveries d WHERE d.event_id = u.id) d ON true
ORDER BY u.n
