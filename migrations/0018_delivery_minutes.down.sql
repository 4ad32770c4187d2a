DROP TABLE outbox.delivery_minutes;
