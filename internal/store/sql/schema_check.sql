-- Whether the outbox tables exist (the migration version is read only if so).
SELECT to_regclass('outbox.events') IS NOT NULL AND to_regclass('outbox.deliveries') IS NOT NULL
   AND to_regclass('outbox.schema_migrations') IS NOT NULL
