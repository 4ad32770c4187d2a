-- Since when failures go to dead-letter topic $1: the first time a relay
-- ran with it (recorded now if this is that time).
WITH ins AS (
    INSERT INTO outbox.dead_letter_topics (topic) VALUES ($1) ON CONFLICT (topic) DO NOTHING RETURNING since
)
SELECT since FROM ins
UNION ALL
SELECT since FROM outbox.dead_letter_topics WHERE topic = $1
LIMIT 1
