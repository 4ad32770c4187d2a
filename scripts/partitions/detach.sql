-- Detaches one partition (:part) from its parent (:parent). A DEFAULT
-- partition exists, so DETACH ... CONCURRENTLY is refused ("cannot detach
-- partitions concurrently when a default partition exists"); a plain
-- DETACH takes ACCESS EXCLUSIVE on the parent for a moment, and
-- lock_timeout bounds how long the application's INSERTs can queue behind
-- it while it waits for the transactions that hold the parent (run.sh
-- tries again). A detached table is then dropped with no lock on the parent.
\set ON_ERROR_STOP on
SET lock_timeout = :'lock_timeout';
ALTER TABLE proto.:parent DETACH PARTITION proto.:part;
