DROP TRIGGER deliveries_unindexable ON outbox.deliveries;
DROP FUNCTION outbox.deliveries_drop_unindexable();
