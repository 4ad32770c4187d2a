-- Retention walks past the events of one instant that it keeps. Events of
-- one transaction share their created_at (now() is the transaction's
-- start), and a walk whose cursor was created_at alone stepped a
-- microsecond past an instant once a whole batch of it had been walked: the
-- rest of a transaction of more than a batch (100) or two of events was
-- never deleted (relay/retention_test.go, "OfManyBatches"). A step now
-- walks past the events created at its cursor that earlier steps kept
-- (FAILED, PENDING, held by another session): an offset into the events of
-- that instant, in the created_at index's order, which deleting the others
-- does not change.

-- How many events created at walked_past_at the walk has walked and kept:
-- a pass goes on past them when walked_past_at is walked_to. A relay of an
-- earlier release, still running beside a new one, records walked_to
-- alone, and the count, of another instant, then counts for nothing.
ALTER TABLE outbox.retention_progress
    ADD COLUMN walked_past bigint NOT NULL DEFAULT 0 CHECK (walked_past >= 0),
    ADD COLUMN walked_past_at timestamptz;

COMMENT ON COLUMN outbox.retention_progress.walked_past IS
    'how many events created at walked_past_at the walk has walked and kept: the next step walks past them if walked_past_at is walked_to';

-- The events (retention_walk) or mapped events' status rows
-- (retention_walk_mapped) created in [p_from, p_cutoff), oldest first, past
-- the first p_skip, at most p_limit: in the created_at index's order, which
-- the settings below hold the planner to (a small table's sequential scan
-- and sort returned the events of one instant in another order each time,
-- and the offset walked past others than the ones kept).
CREATE FUNCTION outbox.retention_walk(p_from timestamptz, p_cutoff timestamptz, p_limit integer, p_skip bigint)
RETURNS TABLE (id uuid, created_at timestamptz)
LANGUAGE sql STABLE ROWS 100
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off SET max_parallel_workers_per_gather = 0
AS $$
    SELECT e.id, e.created_at FROM outbox.events e
    WHERE e.created_at OPERATOR(pg_catalog.>=) p_from AND e.created_at OPERATOR(pg_catalog.<) p_cutoff
    ORDER BY e.created_at
    LIMIT p_limit OFFSET p_skip
$$;

CREATE FUNCTION outbox.retention_walk_mapped(p_from timestamptz, p_cutoff timestamptz, p_limit integer, p_skip bigint)
RETURNS TABLE (event_id uuid, created_at timestamptz)
LANGUAGE sql STABLE ROWS 100
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off SET max_parallel_workers_per_gather = 0
AS $$
    SELECT d.event_id, d.created_at FROM outbox.deliveries d
    WHERE d.source IS NOT NULL
      AND d.created_at OPERATOR(pg_catalog.>=) p_from AND d.created_at OPERATOR(pg_catalog.<) p_cutoff
    ORDER BY d.created_at
    LIMIT p_limit OFFSET p_skip
$$;
