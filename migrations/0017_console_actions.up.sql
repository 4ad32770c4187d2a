-- The operator console's action log (issue 41): every resend or skip the
-- console carries out, with who asked (the token's role, the remote
-- address, the database role), what (the action and its filter or event
-- ids), how many rows it changed, and, when it failed, the error id the
-- browser was shown (the console's log has the details). Operators read it
-- (outbox_operator: SELECT); nobody but the schema's owner changes it.
CREATE TABLE outbox.console_actions (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- admin or read: the token the request carried; none: the console has
    -- no token (loopback only).
    token_role   text        NOT NULL CHECK (token_role IN ('admin', 'read', 'none')),
    remote_addr  text        NOT NULL,
    action       text        NOT NULL,
    -- {"event_ids": [...]}, or the filter of "all matching":
    -- {"topic", "event_type", "reason", "until"} (the fields given).
    filter       jsonb       NOT NULL,
    rows_changed bigint      NOT NULL,
    error_id     text,
    db_user      text        NOT NULL
);

COMMENT ON TABLE outbox.console_actions IS
    'every action of the operator console (outbox-relay console, run --console-addr), written by outbox.log_console_action';

-- The console writes a row in the transaction of its action: an action
-- that cannot be logged is not done. SECURITY DEFINER: operators may add
-- rows through it, never change or delete one; db_user is the session's
-- login role, whoever calls it.
CREATE FUNCTION outbox.log_console_action(
    p_token_role   text,
    p_remote_addr  text,
    p_action       text,
    p_filter       jsonb,
    p_rows_changed bigint,
    p_error_id     text
) RETURNS bigint
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO outbox.console_actions (token_role, remote_addr, action, filter, rows_changed, error_id, db_user)
    VALUES (p_token_role, p_remote_addr, p_action, p_filter, p_rows_changed, p_error_id, session_user)
    RETURNING id;
$$;

-- roles.sql grants it to outbox_operator.
REVOKE EXECUTE ON FUNCTION outbox.log_console_action(text, text, text, jsonb, bigint, text) FROM PUBLIC;
