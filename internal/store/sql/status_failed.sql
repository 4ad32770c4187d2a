-- FAILED events by failure_reason, most first: every reason (walked one
-- index descent each over deliveries_failed_reason_idx, indexes.sql), each
-- counted up to $1 rows (NULL: all; the console bounds it, `outbox-relay
-- status` does not). FAILED rows without a reason are counted as ''. Each
-- step reads the table's row too (attempts is not in the index; see overview_outstanding.sql: a plain
-- index scan marks the entries of rows no longer FAILED as dead).
WITH RECURSIVE r AS (
    SELECT (SELECT d.failure_reason FROM outbox.deliveries d
            WHERE d.status = 'FAILED' AND d.failure_reason IS NOT NULL AND d.attempts >= 0
            ORDER BY d.failure_reason LIMIT 1) AS reason
    UNION ALL
    SELECT (SELECT d.failure_reason FROM outbox.deliveries d
            WHERE d.status = 'FAILED' AND d.failure_reason > r.reason AND d.attempts >= 0
            ORDER BY d.failure_reason LIMIT 1)
    FROM r WHERE r.reason IS NOT NULL
)
SELECT * FROM (
    SELECT r.reason, (SELECT count(*) FROM (SELECT 1 FROM outbox.deliveries d
                                            WHERE d.status = 'FAILED' AND d.failure_reason = r.reason LIMIT $1) c) AS n
    FROM r WHERE r.reason IS NOT NULL
    UNION ALL
    SELECT '', (SELECT count(*) FROM (SELECT 1 FROM outbox.deliveries d
                                      WHERE d.status = 'FAILED' AND d.failure_reason IS NULL LIMIT $1) c)
) x
WHERE x.n > 0
ORDER BY 2 DESC, 1
