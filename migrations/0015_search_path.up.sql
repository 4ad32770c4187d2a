-- Every function of the outbox runs with search_path pg_catalog, pg_temp,
-- whoever calls it: the writer's INSERT (outbox.uuid_v7(), the default of
-- outbox.events.id), the relay, an operator (outbox.resend and the other
-- operator functions). Before, a function ran with its caller's
-- search_path, on which schema public (writable by every role on
-- PostgreSQL 14, and on later clusters that kept that) came before the
-- built-ins wherever an argument's type was not exactly the built-in's: a
-- role that may only insert events could create public.set_bit(bytea,
-- integer, integer) and have it run by every writer, or
-- public.convert_to(text, text) and have it run by the relay and the
-- operators (CVE-2018-1058). pg_temp is listed last: left out, it is
-- searched first. A function a later version adds sets it too (a test
-- checks every function of the schema).
--
-- The bodies that called built-ins with inexact argument types call them
-- exactly, named with their schema, as well.

-- The status row id of a mapped event (version 12), with the same result.
CREATE OR REPLACE FUNCTION outbox.event_id(p_source text, p_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.encode(pg_catalog.set_byte(pg_catalog.set_byte(h, 6, (pg_catalog.get_byte(h, 6) & 15) | 128),
                                                 8, (pg_catalog.get_byte(h, 8) & 63) | 128), 'hex'::text)::uuid
    FROM (SELECT substring(pg_catalog.sha256(pg_catalog.convert_to(p_source, 'UTF8'::name) || '\x00'::bytea
                                             || pg_catalog.convert_to(p_id, 'UTF8'::name)) FROM 1 FOR 16) AS h) s;
$$;

-- outbox.uuid_v7() as version 11 left it: PostgreSQL 18's uuidv7(), or
-- version 4's (set_bit takes a bigint bit number since PostgreSQL 14).
DO $$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer >= 180000 THEN
        CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
        LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS 'SELECT pg_catalog.uuidv7()';
    ELSE
        CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
        LANGUAGE sql VOLATILE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $f$
            -- A version 4 uuid with its first 48 bits replaced by the time, and its
            -- version nibble turned from 0100 into 0111 (bits 52 and 53 set).
            SELECT pg_catalog.encode(
                pg_catalog.set_bit(pg_catalog.set_bit(
                    overlay(pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
                            PLACING substring(pg_catalog.int8send(pg_catalog.floor(
                                extract(epoch FROM pg_catalog.clock_timestamp()) * 1000::numeric)::bigint) FROM 3)
                            FROM 1 FOR 6),
                    52::bigint, 1), 53::bigint, 1),
                'hex'::text)::uuid
        $f$;
    END IF;
END $$;

-- The insertion order's default (version 9) as its text says: a default
-- is bound to its function when it is set, under the search_path of
-- then, so setting it again under this one drops whatever a function in
-- public might have taken its place.
ALTER TABLE outbox.events ALTER COLUMN seq SET DEFAULT pg_catalog.nextval('outbox.events_seq_seq'::pg_catalog.regclass);

DO $$
DECLARE f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'outbox'::pg_catalog.regnamespace LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END $$;
