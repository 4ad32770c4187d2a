DROP FUNCTION outbox.log_console_action(text, text, text, jsonb, bigint, text);
DROP TABLE outbox.console_actions;
