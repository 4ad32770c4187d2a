-- Whether publication $1 exists, and whether it publishes table $2.$3
-- (partitions through their root are listed as the root).
SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
       EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)
