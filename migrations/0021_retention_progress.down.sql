DROP TABLE outbox.retention_progress;
