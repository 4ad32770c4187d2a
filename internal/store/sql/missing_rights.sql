-- What group role $1 may do on the outbox's schema, tables, views,
-- sequences and functions that the current role may not: the grants a
-- login role lacks for $1's job. Reads the catalog only, so it answers for
-- a role refused everything else. No rows when $1 does not exist.
WITH g AS (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = $1),
ns AS (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = 'outbox'),
rels AS (
    SELECT c.oid, c.relkind FROM pg_catalog.pg_class c, ns
    WHERE c.relnamespace = ns.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
),
lacks AS (
    SELECT 1 AS o, 'USAGE ON SCHEMA outbox' AS what FROM g, ns
    WHERE pg_catalog.has_schema_privilege(g.oid, ns.oid, 'USAGE')
      AND NOT pg_catalog.has_schema_privilege(current_user, ns.oid, 'USAGE')
    UNION ALL
    SELECT 2, p.p || ' ON ' || r.oid::regclass::text FROM g, rels r,
           unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p(p)
    WHERE r.relkind <> 'S' AND pg_catalog.has_table_privilege(g.oid, r.oid, p.p)
      AND NOT pg_catalog.has_table_privilege(current_user, r.oid, p.p)
    UNION ALL
    SELECT 3, 'USAGE ON SEQUENCE ' || r.oid::regclass::text FROM g, rels r
    WHERE r.relkind = 'S' AND pg_catalog.has_sequence_privilege(g.oid, r.oid, 'USAGE')
      AND NOT pg_catalog.has_sequence_privilege(current_user, r.oid, 'USAGE')
    UNION ALL
    SELECT 4, 'EXECUTE ON FUNCTION ' || f.oid::regprocedure::text FROM g, ns, pg_catalog.pg_proc f
    WHERE f.pronamespace = ns.oid AND pg_catalog.has_function_privilege(g.oid, f.oid, 'EXECUTE')
      AND NOT pg_catalog.has_function_privilege(current_user, f.oid, 'EXECUTE')
)
SELECT current_user::text, EXISTS (SELECT 1 FROM g),
       coalesce((SELECT pg_catalog.array_agg(l.what ORDER BY l.o, l.what) FROM lacks l), '{}')
