package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	// At and DBUser are the log's: when, and the database role (read
	// only).
	At     time.Time
	DBUser string
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

// ConsoleActions lists the console's last limit actions, newest first.
func (s *Store) ConsoleActions(ctx context.Context, limit int) ([]ConsoleAction, error) {
	return collect(ctx, s.db, "reading outbox.console_actions", func(r pgx.CollectableRow) (ConsoleAction, error) {
		var a ConsoleAction
		var errorID *string
		err := r.Scan(&a.At, &a.TokenRole, &a.RemoteAddr, &a.Action, &a.Filter, &a.RowsChanged, &errorID, &a.DBUser)
		if errorID != nil {
			a.ErrorID = *errorID
		}
		return a, err
	}, `SELECT at, token_role, remote_addr, action, filter::text, rows_changed, error_id, db_user
		FROM outbox.console_actions ORDER BY id DESC LIMIT $1`, limit)
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
