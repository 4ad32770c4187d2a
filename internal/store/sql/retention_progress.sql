-- Where --retention's walk $1 ('events' or 'mapped') ended, and when its
-- last walk from the oldest event began (migration 21); no row: never.
SELECT walked_to, full_walk_at FROM outbox.retention_progress WHERE walk = $1
