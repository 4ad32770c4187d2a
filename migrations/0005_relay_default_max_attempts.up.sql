-- A status row without max_attempts follows the configured policy of the
-- relay that handles it (--retry-max-attempts), as a row without a
-- retry_policy already does. outbox.resend no longer writes its own copy of
-- that default; an event's own max_attempts still wins.
ALTER TABLE outbox.deliveries ALTER COLUMN max_attempts DROP NOT NULL,
                              ALTER COLUMN max_attempts DROP DEFAULT;

CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, max_attempts FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d (event_id, status, attempts, next_attempt_at, max_attempts)
        SELECT ev.id, 'PENDING', 0, now(), ev.max_attempts FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;
