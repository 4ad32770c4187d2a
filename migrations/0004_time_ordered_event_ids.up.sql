-- New event ids are UUID version 7 (RFC 9562): 48 bits of Unix milliseconds,
-- then 74 random bits. Random (version 4) ids put each new row's primary key
-- entry, in outbox.events and again in outbox.deliveries, on a random index
-- page: more pages touched per insert and, after every checkpoint, a
-- full-page image in the WAL for each of them, which the walsender then
-- reads. Time-ordered ids append at the right edge of both indexes.
--
-- Existing ids stay as they are; an application that sets id itself may use
-- any uuid (version 7 keeps this benefit). The id reveals when the event was
-- created, to the millisecond, as created_at already does.
CREATE FUNCTION outbox.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    -- A version 4 uuid with its first 48 bits replaced by the time, and its
    -- version nibble turned from 0100 into 0111 (bits 52 and 53 set).
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

COMMENT ON FUNCTION outbox.uuid_v7() IS 'a time-ordered UUID (version 7): the default for outbox.events.id';

ALTER TABLE outbox.events ALTER COLUMN id SET DEFAULT outbox.uuid_v7();
