-- Deletes the per-minute counts of minutes before $1 (--history-retention).
DELETE FROM outbox.delivery_minutes m WHERE m.minute < $1
