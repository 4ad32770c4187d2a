DROP TABLE outbox.slot_backfills;
