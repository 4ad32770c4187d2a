-- Where --retention's walk $1 ('events' or 'mapped') ended, how many of
-- the events created at that instant it kept (none if a relay of an
-- earlier release, which records walked_to alone, moved it since), and
-- when its last walk from the oldest event began (migrations 21 and 22);
-- no row: never.
SELECT walked_to, CASE WHEN walked_past_at = walked_to THEN walked_past ELSE 0 END, full_walk_at
FROM outbox.retention_progress WHERE walk = $1
