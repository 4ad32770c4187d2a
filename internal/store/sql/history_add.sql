-- Adds a relay's counts to outbox.delivery_minutes: per minute ($1) and
-- topic ($2), events recorded SENT ($3) and FAILED ($4). Additive, so the
-- counts of several relays (and of one relay's successive flushes of the
-- same minute) add up. The caller sorts the rows by minute and topic: two
-- relays then lock shared rows in one order.
INSERT INTO outbox.delivery_minutes AS m (minute, topic, delivered, failed)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::bigint[])
ON CONFLICT (minute, topic) DO UPDATE
SET delivered = m.delivered + EXCLUDED.delivered, failed = m.failed + EXCLUDED.failed
