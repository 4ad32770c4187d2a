-- Adds a relay's counts: to outbox.delivery_minutes per minute ($1) and
-- topic ($2) events recorded SENT ($3) and FAILED ($4), each minute's
-- total under '(all)' among them; to outbox.delivery_hours per hour ($5)
-- and topic ($6) the same ($7, $8). Additive, so the counts of several
-- relays (and of one relay's successive flushes of the same minute) add
-- up. The caller sorts the rows by time and topic, and every writer writes
-- the minutes before the hours: two relays lock shared rows in one order.
WITH minutes AS (
    INSERT INTO outbox.delivery_minutes AS m (minute, topic, delivered, failed)
    SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::bigint[])
    ON CONFLICT (minute, topic) DO UPDATE
    SET delivered = m.delivered + EXCLUDED.delivered, failed = m.failed + EXCLUDED.failed
    RETURNING 1
)
INSERT INTO outbox.delivery_hours AS h (hour, topic, delivered, failed)
SELECT * FROM unnest($5::timestamptz[], $6::text[], $7::bigint[], $8::bigint[])
WHERE (SELECT count(*) FROM minutes) >= 0 -- the minutes first
ON CONFLICT (hour, topic) DO UPDATE
SET delivered = h.delivered + EXCLUDED.delivered, failed = h.failed + EXCLUDED.failed
