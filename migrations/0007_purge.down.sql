DROP FUNCTION outbox.purge(interval, text, int, text);
