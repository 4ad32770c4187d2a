-- Takes due rows, skipping rows another instance holds, and returns each
-- with its event in binary format (the layout that serves the stream reads
-- it), in key order. relay_prev_delay_ms is the wait that led here.
--
-- Key order is (seq, commit_lsn, tx_position, event_id): the insertion
-- order of the events (outbox.events.seq), which every row carries whatever
-- path wrote it; rows from before seq existed (0) keep their commit order,
-- or for rows written without one (commit_lsn 0/0), their id order. A row
-- with a key is taken only when no earlier row of its topic and key is
-- PENDING, PROCESSING or, when $4 (the hold policy), FAILED, unless that
-- earlier row is taken in this same claim (and is then published first).
--
-- Candidates are chosen by key head, so that a key whose first unfinished
-- row is due always moves, wherever its rows fall in the due order (the
-- sweep or a retry can give a key's first row a later next_attempt_at than
-- thousands behind it). Each step is an index descent per row or per key:
--   cand:    due rows, oldest due first, whose key's first unfinished row
--            is PENDING and due (rows of a key held by a FAILED row, a
--            retry or another instance are passed over);
--   runs:    per key in cand, as many of its unfinished rows as cand holds
--            of it, from its first, in key order; MATERIALIZED, so it runs
--            once per key;
--   ready:   the leading rows of each run that are PENDING and due, and
--            cand's rows without a key;
--   due:     those rows locked, skipping rows another instance is taking,
--            read by primary key (= ANY of an array built once; the status
--            test is written so that no partial index matches it): planned
--            on statistics of an empty outbox, an IN (ready) drove the lock
--            from the due index and re-ran ready for every due row;
--   blocked: per key in due, its first unfinished row that due does not
--            hold; MATERIALIZED, so it runs once (planned inline while
--            outbox.deliveries looked empty, it was re-run for every row);
--   taken:   the rows of due before it. A row another instance holds is not
--            in due, so what comes after it waits: two instances never take
--            the same key's rows apart;
--   claimed: taken marked PROCESSING, read by primary key (= ANY again),
--            never by a scan; the values it had before (o, the same rows in
--            the statement's snapshot, merged by key) give the wait that led
--            here. No step joins a CTE to another inside a loop: planned on
--            a CTE's estimate of a row or two, a join of claimed rows to
--            taken compared every row with every other (4,000,000
--            comparisons, 0.9 s, to claim 2,000), and events probed with
--            id = ANY (...) prepared that array again for every row;
--   (final): each claimed row's event read by primary key; a row without
--            one is a mapped event's, whose record Claim reads from
--            outbox.mapped_events.
-- At most $2 rows are taken: runs holds no more rows than cand. The LIMIT $2
-- on runs and ready changes nothing but the planner's estimate: without it,
-- LIMIT k.n per key read as a tenth of each key's rows, and on a queue the
-- statistics still saw as large, the UPDATE was planned as hash joins over
-- sequential scans of outbox.deliveries and outbox.events (1.6 s a claim on
-- 300,000 rows, against 70 ms).
--
-- $1: instance; $2: limit; $3: now; $4: hold.
WITH cand AS (
    SELECT d.event_id, d.topic, d.key
    FROM outbox.deliveries d
    WHERE d.status = 'PENDING' AND d.next_attempt_at <= coalesce($3::timestamptz, now())
      AND (d.key IS NULL OR (
          SELECT h.status = 'PENDING' AND h.next_attempt_at <= coalesce($3::timestamptz, now())
          FROM outbox.deliveries h
          WHERE h.key IS NOT NULL AND h.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (h.status <> 'FAILED' OR $4::boolean)
            AND h.topic = d.topic AND h.key = d.key
          ORDER BY h.seq, h.commit_lsn, h.tx_position, h.event_id LIMIT 1))
    ORDER BY d.next_attempt_at, d.seq, d.commit_lsn, d.tx_position, d.event_id
    LIMIT $2
), runs AS MATERIALIZED (
    SELECT r.*
    FROM (SELECT topic, key, count(*) AS n FROM cand WHERE key IS NOT NULL GROUP BY topic, key) k
    CROSS JOIN LATERAL (
        SELECT r.event_id, r.topic, r.key, r.status, r.next_attempt_at, r.commit_lsn, r.tx_position, r.seq
        FROM outbox.deliveries r
        WHERE r.key IS NOT NULL AND r.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (r.status <> 'FAILED' OR $4::boolean)
          AND r.topic = k.topic AND r.key = k.key
        ORDER BY r.seq, r.commit_lsn, r.tx_position, r.event_id
        LIMIT k.n) r
    LIMIT $2
), ready AS (
    SELECT event_id FROM (
        SELECT event_id, bool_and(status = 'PENDING' AND next_attempt_at <= coalesce($3::timestamptz, now()))
                   OVER (PARTITION BY topic, key ORDER BY seq, commit_lsn, tx_position, event_id) AS runs_ready
        FROM runs) r
    WHERE runs_ready
    UNION ALL
    SELECT event_id FROM cand WHERE key IS NULL
    LIMIT $2
), due AS (
    SELECT d.event_id, d.topic, d.key, d.commit_lsn, d.tx_position, d.seq, d.next_attempt_at, d.updated_at
    FROM outbox.deliveries d
    WHERE d.event_id = ANY (ARRAY(SELECT event_id FROM ready))
      AND coalesce(d.status = 'PENDING' AND d.next_attempt_at <= coalesce($3::timestamptz, now()), false)
    FOR UPDATE OF d SKIP LOCKED
), blocked AS MATERIALIZED (
    SELECT k.topic, k.key, b.seq, b.commit_lsn, b.tx_position, b.event_id
    FROM (SELECT DISTINCT topic, key FROM due WHERE key IS NOT NULL) k CROSS JOIN LATERAL (
        SELECT b.seq, b.commit_lsn, b.tx_position, b.event_id FROM outbox.deliveries b
        WHERE b.key IS NOT NULL AND b.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (b.status <> 'FAILED' OR $4::boolean)
          AND b.topic = k.topic AND b.key = k.key AND b.event_id NOT IN (SELECT event_id FROM due)
        ORDER BY b.seq, b.commit_lsn, b.tx_position, b.event_id LIMIT 1) b
), taken AS (
    SELECT due.* FROM due LEFT JOIN blocked bl ON bl.topic = due.topic AND bl.key = due.key
    WHERE due.key IS NULL OR bl.event_id IS NULL
       OR (due.seq, due.commit_lsn, due.tx_position, due.event_id) < (bl.seq, bl.commit_lsn, bl.tx_position, bl.event_id)
), claimed AS (
    UPDATE outbox.deliveries d
    SET status = 'PROCESSING', locked_by = $1, locked_at = coalesce($3::timestamptz, now()),
        updated_at = coalesce($3::timestamptz, now())
    FROM outbox.deliveries o
    WHERE d.event_id = o.event_id
      AND d.event_id = ANY (ARRAY(SELECT event_id FROM taken)) AND o.event_id = ANY (ARRAY(SELECT event_id FROM taken))
    RETURNING d.event_id, d.attempts AS relay_attempts, coalesce(d.max_attempts, 0) AS relay_max_attempts,
              d.retry_policy AS relay_retry_policy,
              (extract(epoch FROM o.next_attempt_at - o.updated_at) * 1000)::bigint AS relay_prev_delay_ms,
              d.commit_lsn AS relay_commit_lsn, d.tx_position AS relay_tx_position, d.seq AS relay_seq,
              d.source AS relay_source
)
SELECT c.relay_attempts, c.relay_max_attempts, c.relay_retry_policy, c.relay_prev_delay_ms,
       c.relay_commit_lsn, c.relay_tx_position, c.relay_seq, c.event_id AS relay_event_id, e.*
-- A mapped event's row (source set) takes no event of outbox.events, even
-- one with its id (an event there may take a mapped event's id, migration
-- 23): its record is its kept copy (store.keptRecords).
FROM claimed c LEFT JOIN outbox.events e ON e.id = c.event_id AND c.relay_source IS NULL
ORDER BY c.relay_seq, c.relay_commit_lsn NULLS FIRST, c.relay_tx_position NULLS FIRST, c.event_id
