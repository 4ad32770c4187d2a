-- Where events_page_key.sql's walk ended: the $3th event of key $2 before
-- event $1 (NULL: from the newest); no row when the walk reached the
-- key's oldest.
SELECT u.id::text FROM ((SELECT x.id FROM outbox.events x
                         WHERE x.key = $2 AND ($1::uuid IS NULL OR x.id < $1) ORDER BY x.id DESC LIMIT $3)
                        UNION ALL
                        (SELECT m.id FROM outbox.mapped_events m
                         WHERE m.key = $2 AND ($1::uuid IS NULL OR m.id < $1) ORDER BY m.id DESC LIMIT $3)) u
ORDER BY u.id DESC
OFFSET $3 - 1 LIMIT 1
