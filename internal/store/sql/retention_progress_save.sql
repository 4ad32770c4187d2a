-- Records that --retention's walk $1 ('events' or 'mapped') has got to $2,
-- past $3 events created at that instant that it kept, in a walk that went
-- on from one that began at the oldest event at $4.
INSERT INTO outbox.retention_progress (walk, walked_to, walked_past, walked_past_at, full_walk_at) VALUES ($1, $2, $3, $2, $4)
ON CONFLICT (walk) DO UPDATE SET walked_to = EXCLUDED.walked_to, walked_past = EXCLUDED.walked_past,
    walked_past_at = EXCLUDED.walked_past_at, full_walk_at = EXCLUDED.full_walk_at
