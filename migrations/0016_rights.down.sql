DROP FUNCTION outbox.resend_if_failed(uuid);
ALTER FUNCTION outbox.resend(uuid) SECURITY INVOKER RESET search_path;
ALTER FUNCTION outbox.resend(text, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz)
    SECURITY INVOKER RESET search_path;
ALTER FUNCTION outbox.skip(uuid) SECURITY INVOKER RESET search_path;
ALTER FUNCTION outbox.skip_failed(text, text, text, timestamptz, timestamptz) SECURITY INVOKER RESET search_path;
ALTER FUNCTION outbox.purge(interval, text, int, text, text, text, timestamptz, timestamptz)
    SECURITY INVOKER RESET search_path;
