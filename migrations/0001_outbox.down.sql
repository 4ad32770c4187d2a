DROP PUBLICATION IF EXISTS outbox_relay;
DROP TABLE IF EXISTS outbox.deliveries;
DROP TABLE IF EXISTS outbox.events;
