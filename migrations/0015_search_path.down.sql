-- Back to version 14: the functions run with their caller's search_path,
-- outbox.event_id() and outbox.uuid_v7() as versions 12 and 11 wrote them.
DO $$
DECLARE f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'outbox'::pg_catalog.regnamespace LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RESET search_path', f);
    END LOOP;
END $$;

ALTER TABLE outbox.events ALTER COLUMN seq SET DEFAULT nextval('outbox.events_seq_seq');

CREATE OR REPLACE FUNCTION outbox.event_id(p_source text, p_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT encode(set_byte(set_byte(h, 6, (get_byte(h, 6) & 15) | 128), 8, (get_byte(h, 8) & 63) | 128), 'hex')::uuid
    FROM (SELECT substring(sha256(convert_to(p_source, 'UTF8') || '\x00'::bytea || convert_to(p_id, 'UTF8')) FROM 1 FOR 16) AS h) s;
$$;

DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 180000 THEN
        CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
        LANGUAGE sql VOLATILE PARALLEL SAFE AS 'SELECT uuidv7()';
    ELSE
        CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
        LANGUAGE sql VOLATILE PARALLEL SAFE AS $f$
            -- A version 4 uuid with its first 48 bits replaced by the time, and its
            -- version nibble turned from 0100 into 0111 (bits 52 and 53 set).
            SELECT encode(
                set_bit(set_bit(
                    overlay(uuid_send(gen_random_uuid())
                            PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                            FROM 1 FOR 6),
                    52, 1), 53, 1),
                'hex')::uuid
        $f$;
    END IF;
END $$;
