-- Back to outbox.uuid_v7() of version 4 and the publication's default.
CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
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

DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 180000
       AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'outbox_relay') THEN
        ALTER PUBLICATION outbox_relay SET (publish_generated_columns = none);
    END IF;
END $$;
