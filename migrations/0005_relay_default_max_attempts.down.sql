UPDATE outbox.deliveries SET max_attempts = 5 WHERE max_attempts IS NULL;
ALTER TABLE outbox.deliveries ALTER COLUMN max_attempts SET DEFAULT 5,
                              ALTER COLUMN max_attempts SET NOT NULL;

CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, max_attempts FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d (event_id, status, attempts, next_attempt_at, max_attempts)
        SELECT ev.id, 'PENDING', 0, now(), coalesce(ev.max_attempts, 5) FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;
