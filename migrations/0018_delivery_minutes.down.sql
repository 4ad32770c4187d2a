DROP TABLE outbox.delivery_hours;
DROP TABLE outbox.delivery_minutes;
