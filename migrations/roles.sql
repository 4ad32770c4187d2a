-- The group roles of the outbox (NOLOGIN; grant them to login roles), with
-- exactly what each job needs on the schema. `outbox-relay migrate` runs
-- this after the migrations, every time (it is idempotent, and grants what
-- a new version added), unless --roles=false; `migrate --print` prints it.
-- Roles that exist are left as they are, apart from these grants.
--
--   outbox_writer    applications: INSERT into outbox.events (and the
--                    sequence its seq column's default calls; SELECT of id for
--                    INSERT ... RETURNING id). Nothing on outbox.deliveries.
--   outbox_operator  people and the CLI's operator commands (failed, resend,
--                    skip, held, purge, status): read everything, change status
--                    rows through the functions, purge. No INSERT into the
--                    outbox, no DDL.
--   outbox_relay     the relay: read the outbox, write status rows and copies,
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

GRANT INSERT, SELECT (id) ON outbox.events TO outbox_writer;
GRANT USAGE ON SEQUENCE outbox.events_seq_seq TO outbox_writer;

GRANT SELECT ON ALL TABLES IN SCHEMA outbox TO outbox_operator;
GRANT INSERT, UPDATE, DELETE ON outbox.deliveries TO outbox_operator;
GRANT DELETE ON outbox.events, outbox.mapped_events TO outbox_operator;

GRANT SELECT, DELETE ON outbox.events TO outbox_relay;
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox.deliveries, outbox.mapped_events, outbox.slot_backfills TO outbox_relay;
GRANT SELECT, INSERT ON outbox.dead_letter_topics TO outbox_relay;
GRANT SELECT ON outbox.schema_migrations, outbox.relayed_events, outbox.failed_events, outbox.delivery_stats,
    outbox.held_keys TO outbox_relay;

-- The operator's functions run with their caller's rights; only operators
-- (and the owner) may call them.
DO $$
DECLARE f pg_catalog.regprocedure;
BEGIN
    FOR f IN SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'outbox'::pg_catalog.regnamespace
               AND p.proname::text IN ('resend', 'resend_failed', 'skip', 'skip_failed', 'purge') LOOP
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO outbox_operator', f);
    END LOOP;
END $$;
