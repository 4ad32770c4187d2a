-- How far the gap sweep may walk: the grace window ($1 ms) ago, and never
-- past the start of the oldest transaction open in this database.
-- created_at defaults to now(), the transaction's start, so an open
-- transaction (even one that has not written yet) may still commit events
-- older than anything swept so far. 10 ms cover the gap between a
-- transaction taking its start time and reporting it. The second column is
-- the same with the recheck delay ($2 ms) instead of the grace. $3: now.
--
-- It must run in its own statement, before the sweep's: a sweep that read
-- pg_stat_activity after taking its snapshot could miss a transaction that
-- committed in between (gone from pg_stat_activity, invisible to the
-- snapshot) and walk past its events for good.
WITH open AS (
    SELECT least(coalesce((SELECT min(xact_start) FROM pg_stat_activity
                           WHERE xact_start IS NOT NULL AND backend_type = 'client backend'
                             AND datname = current_database() AND pid <> pg_backend_pid()), 'infinity'),
                 coalesce((SELECT min(prepared) FROM pg_prepared_xacts), 'infinity')) AS oldest
)
SELECT least(coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond', oldest) - interval '10 milliseconds',
       least(coalesce($3::timestamptz, now()) - $2 * interval '1 millisecond', oldest) - interval '10 milliseconds'
FROM open
