-- The columns of table $1.$2: name, type, NOT NULL, whether a unique index
-- without a predicate covers the column alone, and whether it is generated
-- (pgoutput streams stored generated columns only from PostgreSQL 18, when
-- the publication asks), its DEFAULT expression as pg_get_expr gives it
-- (Debezium's schemas carry it) and its type modifier (a timestamp's
-- precision). No rows: no such table.
SELECT a.attname, a.atttypid::int8, a.attnotnull,
       EXISTS (SELECT 1 FROM pg_index i
               WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL
                 AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum) AS is_unique,
       a.attgenerated <> '' AS generated,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS default_expr,
       a.atttypmod
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum AND a.attgenerated = ''
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
ORDER BY a.attnum
