-- Ends the walsender with the given pid (and nothing else): a relay whose
-- replication connection went silent frees its slot for the next session.
SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)
FROM pg_stat_replication
WHERE pid = $1
