-- (after held_keys_walk.sql) How many keys are held, counted up to $4.
SELECT count(*) FROM (SELECT 1 FROM held LIMIT $4) h
