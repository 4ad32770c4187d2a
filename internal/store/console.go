package store

import (
	"context"
	"fmt"
)

// ConsoleAction is one action of the operator console, as
// outbox.console_actions keeps it.
type ConsoleAction struct {
	// TokenRole is admin or read (the token the request carried), or none
	// (the console has no token: loopback only).
	TokenRole  string
	RemoteAddr string
	Action     string // resend or skip
	// Filter is the action's event ids or filter, as a JSON object.
	Filter      []byte
	RowsChanged int64
	ErrorID     string // the id of the error the browser was shown; "": none
}

// LogConsoleAction adds a to the console's action log, through
// outbox.log_console_action (in the transaction of the action, with InTx).
func (s *Store) LogConsoleAction(ctx context.Context, a ConsoleAction) error {
	_, err := s.db.Exec(ctx, `SELECT outbox.log_console_action($1, $2, $3, $4::text::jsonb, $5, $6)`,
		a.TokenRole, a.RemoteAddr, a.Action, string(a.Filter), a.RowsChanged, nullable(a.ErrorID))
	if err != nil {
		return fmt.Errorf("logging the console's %s: %w", a.Action, err)
	}
	return nil
}

// InTx runs fn with a Store whose statements run in one transaction, and
// commits it unless fn fails: then nothing fn did is kept.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	tx, db, limit, err := begin(ctx, s.db)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit: nothing to undo
	t := *s
	t.db, t.status, t.inTx = db, db, true
	if err := fn(&t); err != nil {
		return err
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}
