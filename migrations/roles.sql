-- The group roles of the outbox (NOLOGIN; grant them to login roles), with
-- exactly what each job needs on the schema. `outbox-relay migrate` runs
-- this after the migrations, every time (it is idempotent, grants what a
-- new version added and takes back what an earlier one granted and this
-- one does not), unless --roles=false; `migrate --print` prints it.
-- Roles that exist are left as they are, apart from these grants.
--
--   outbox_writer    applications: INSERT into outbox.events of the columns
--                    an application sets (every column but seq and
--                    created_at, which keep their defaults: insertion order
--                    and the transaction's start; the sequence seq's default
--                    calls; SELECT of id for INSERT ... RETURNING id).
--                    Nothing on outbox.deliveries.
--   outbox_operator  people and the CLI's operator commands (failed, resend,
--                    skip, held, purge, status) and the console: read everything;
--                    change status rows and delete events only through the
--                    outbox's functions (resend, resend_failed,
--                    resend_if_failed, skip, skip_failed, purge), which run
--                    with their owner's rights; add to the console's action
--                    log (outbox.log_console_action). No INSERT, UPDATE or
--                    DELETE on a table, no DDL.
--   outbox_relay     the relay: read the outbox, write status rows, copies,
--                    failed attempts and the History's counts
--                    (outbox.delivery_minutes, outbox.delivery_hours),
--                    delete what retention deletes. Its login role also needs
--                    REPLICATION (a role attribute, not inherited): CREATE ROLE
--                    relay LOGIN REPLICATION IN ROLE outbox_relay.
-- Nobody but the schema's owner may alter the tables or the publication:
-- migrate creates the publication, and adds mapped tables to it.
--
-- The DO blocks name every built-in with its schema (and migrate runs them
-- with search_path pg_catalog, pg_temp): a function of the same name in
-- public must not run with the rights of whoever runs this.
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['outbox_writer', 'outbox_operator', 'outbox_relay'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) r) THEN
            BEGIN
                EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created meanwhile from another database of the cluster
            END;
        END IF;
    END LOOP;
END $$;

GRANT USAGE ON SCHEMA outbox TO outbox_writer, outbox_operator, outbox_relay;

-- Exactly what follows: what earlier versions granted on the outbox's own
-- tables, views and sequences (the operator's INSERT, UPDATE and DELETE, the
-- writer's INSERT of every column) is taken back first, in this
-- transaction, so nobody sees the roles without their rights.
DO $$
DECLARE c regclass;
BEGIN
    FOR c IN SELECT k.oid::regclass FROM pg_catalog.pg_class k
             WHERE k.relnamespace = 'outbox'::regnamespace AND k.relkind IN ('r', 'p', 'v', 'm', 'S')
               AND k.relowner = (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'outbox') LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM outbox_writer, outbox_operator, outbox_relay', c);
    END LOOP;
END $$;

-- The writer inserts the columns an application sets: every column of
-- outbox.events (your own added ones too, as of this migrate) but seq and
-- created_at, whose defaults the queue's order, the gap sweep and
-- retention rely on.
DO $$
DECLARE cols text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%I', a.attname), ', ' ORDER BY a.attnum) INTO cols
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = 'outbox.events'::regclass AND a.attnum > 0 AND NOT a.attisdropped
      AND a.attgenerated = '' AND a.attname NOT IN ('seq', 'created_at');
    EXECUTE pg_catalog.format('GRANT INSERT (%s), SELECT (id) ON outbox.events TO outbox_writer', cols);
END $$;
GRANT USAGE ON SEQUENCE outbox.events_seq_seq TO outbox_writer;

GRANT SELECT ON ALL TABLES IN SCHEMA outbox TO outbox_operator;

GRANT SELECT, DELETE ON outbox.events TO outbox_relay;
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.deliveries, outbox.mapped_events, outbox.slot_backfills TO outbox_relay;
GRANT SELECT, INSERT ON outbox.dead_letter_topics TO outbox_relay;
-- The per-minute counts of the console's History (migration 18): each
-- relay adds its own and deletes those past --history-retention.
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.delivery_minutes, outbox.delivery_hours TO outbox_relay;
-- Failed attempts: added, and the older ones deleted, as attempts fail.
GRANT SELECT, INSERT, DELETE ON outbox.delivery_attempts TO outbox_relay;
-- Where retention's walks have got to (migration 21): the relay that runs
-- retention reads and writes it.
GRANT SELECT, INSERT, UPDATE ON outbox.retention_progress TO outbox_relay;
-- Retention's walks (migration 22), granted outright: a cluster may take
-- EXECUTE on new functions from PUBLIC (ALTER DEFAULT PRIVILEGES).
GRANT EXECUTE ON FUNCTION outbox.retention_walk(timestamptz, timestamptz, integer, bigint),
    outbox.retention_walk_mapped(timestamptz, timestamptz, integer, bigint) TO outbox_relay;
GRANT SELECT ON outbox.schema_migrations, outbox.relayed_events, outbox.failed_events, outbox.delivery_stats,
    outbox.held_keys TO outbox_relay;

-- The operator's functions run with their owner's rights (migration 16;
-- log_console_action, migration 17, only appends to the console's action
-- log); only operators (and the owner) may call them.
DO $$
DECLARE f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'outbox'::pg_catalog.regnamespace
               AND p.proname::text IN ('resend', 'resend_failed', 'resend_if_failed', 'skip', 'skip_failed', 'purge',
                                       'log_console_action') LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO outbox_operator', f);
    END LOOP;
END $$;

-- Retention may compress the WAL of its own deletes where the server's
-- wal_compression is off (set for its own transactions: most of a deleted
-- event's WAL is page images). That is a superuser's setting, which
-- PostgreSQL 15 and newer let a superuser grant; granted when whoever runs
-- this may, else the relay says how once it runs retention. It reaches no
-- other session and changes nothing but the size of the WAL it writes.
-- The grant is the cluster's, and the migration lock only a database's:
-- granted only when missing, and a GRANT from another database's migrate at
-- the same moment (its catalog row updated or inserted meanwhile) is that
-- grant made, not a failure, once the catalog shows it.
DO $$
DECLARE may boolean;
DECLARE has boolean;
BEGIN
    IF pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.>=) 150000 THEN
        EXECUTE 'SELECT pg_catalog.has_parameter_privilege(''wal_compression'', ''SET WITH GRANT OPTION''),
                        pg_catalog.has_parameter_privilege(''outbox_relay'', ''wal_compression'', ''SET'')' INTO may, has;
        IF may AND NOT has THEN
            BEGIN
                EXECUTE 'GRANT SET ON PARAMETER wal_compression TO outbox_relay';
            EXCEPTION WHEN internal_error OR unique_violation THEN
                -- The catalog itself, read anew: has_parameter_privilege
                -- would answer from this session's cache, from before.
                EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_parameter_acl p, pg_catalog.aclexplode(p.paracl) a
                                        WHERE p.parname OPERATOR(pg_catalog.=) ''wal_compression''
                                          AND a.grantee OPERATOR(pg_catalog.=) ''outbox_relay''::pg_catalog.regrole
                                          AND a.privilege_type OPERATOR(pg_catalog.=) ''SET'')' INTO has;
                IF NOT has THEN
                    RAISE;
                END IF;
            END;
        END IF;
    END IF;
END $$;
