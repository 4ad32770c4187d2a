ALTER TABLE outbox.events ALTER COLUMN id SET DEFAULT gen_random_uuid();
DROP FUNCTION IF EXISTS outbox.uuid_v7();
