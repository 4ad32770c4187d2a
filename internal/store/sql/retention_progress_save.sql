-- Records that --retention's walk $1 ('events' or 'mapped') has got to $2,
-- in a walk that went on from one that began at the oldest event at $3.
INSERT INTO outbox.retention_progress (walk, walked_to, full_walk_at) VALUES ($1, $2, $3)
ON CONFLICT (walk) DO UPDATE SET walked_to = EXCLUDED.walked_to, full_walk_at = EXCLUDED.full_walk_at
