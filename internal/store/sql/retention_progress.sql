-- Where --retention's walk $1 ('events' or 'mapped') ended, how many of
-- the events created at that instant it kept, and when its last walk from
-- the oldest event began (migrations 21 and 22); no row: never.
SELECT walked_to, walked_past, full_walk_at FROM outbox.retention_progress WHERE walk = $1
