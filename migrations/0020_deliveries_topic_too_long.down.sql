DROP TRIGGER deliveries_impossible_topic ON outbox.deliveries;
DROP FUNCTION outbox.deliveries_drop_impossible_topic();
