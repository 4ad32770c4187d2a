package cdc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
)

// Errors callers branch on.
var (
	// ErrSetup marks problems an operator must fix (wal_level, version, a
	// slot of the wrong plugin or database, a publication that does not
	// publish outbox inserts); retrying does not help.
	ErrSetup = errors.New("setup problem")
	// ErrSlotInvalid: the server invalidated the slot (it fell behind more
	// than max_slot_wal_keep_size); it can never stream again and must be
	// dropped and created anew.
	ErrSlotInvalid = errors.New("replication slot invalidated")
	// ErrWalSendersFull: the server refused the replication connection
	// because max_wal_senders connections are open. Retried: one may be a
	// relay's old connection still going away.
	ErrWalSendersFull = errors.New("max_wal_senders reached")
)

// SlotInUseError says another process streams from the slot: this one is a
// standby until the slot is free.
type SlotInUseError struct {
	Slot string
	PID  int // 0 when the server did not say
}

func (e *SlotInUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("replication slot %q is in use by another process", e.Slot)
	}
	return fmt.Sprintf("replication slot %q is in use by pid %d", e.Slot, e.PID)
}

// failoverServerVersion is PostgreSQL 17: slots that survive a failover.
const failoverServerVersion = 170000

// SlotInfo describes the replication slot as Prepare found or made it.
type SlotInfo struct {
	ConfirmedFlush pglogrepl.LSN
	Created        bool
}

// minServerVersion is PostgreSQL 14: binary pgoutput.
const minServerVersion = 140000

// Prepare checks the server can stream the outbox, creates the publication
// when it is missing, and reports whether the slot exists (Created=true
// means it does not yet: Open creates it on the replication connection).
func Prepare(ctx context.Context, conn *pgx.Conn, cfg Config) (SlotInfo, error) {
	var walLevel string
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('wal_level'), current_setting('server_version_num')::int`).Scan(&walLevel, &version); err != nil {
		return SlotInfo{}, fmt.Errorf("reading server settings: %w", err)
	}
	if walLevel != "logical" {
		return SlotInfo{}, fmt.Errorf("%w: wal_level is %q; set wal_level=logical in postgresql.conf and restart PostgreSQL", ErrSetup, walLevel)
	}
	if version < minServerVersion {
		return SlotInfo{}, fmt.Errorf("%w: PostgreSQL %d is too old; outbox-relay needs 14 or newer", ErrSetup, version/10000)
	}
	if cfg.Failover && version < failoverServerVersion {
		return SlotInfo{}, fmt.Errorf("%w: --slot-failover needs PostgreSQL 17 or newer (slots created with FAILOVER); this server is %d. "+
			"Before 17 a failover loses the slot and the relay creates it again and backfills", ErrSetup, version/10000)
	}
	var hasTable bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('outbox.events') IS NOT NULL`).Scan(&hasTable); err != nil {
		return SlotInfo{}, fmt.Errorf("looking for outbox.events: %w", err)
	}
	if !hasTable {
		return SlotInfo{}, fmt.Errorf("%w: table outbox.events does not exist; run `outbox-relay migrate` first", ErrSetup)
	}
	if err := preparePublication(ctx, conn, cfg.Publication, cfg.Tables); err != nil {
		return SlotInfo{}, err
	}
	return prepareSlot(ctx, conn, cfg.Slot)
}

func preparePublication(ctx context.Context, conn *pgx.Conn, publication string, tables []string) error {
	var pubInsert, hasEvents bool
	err := conn.QueryRow(ctx, `
		SELECT p.pubinsert,
		       EXISTS (SELECT 1 FROM pg_publication_tables t
		               WHERE t.pubname = p.pubname AND t.schemaname = 'outbox' AND t.tablename = 'events')
		FROM pg_publication p WHERE p.pubname = $1`, publication).Scan(&pubInsert, &hasEvents)
	if errors.Is(err, pgx.ErrNoRows) {
		// PostgreSQL 18 streams stored generated columns when asked, so a
		// generated column reaches the stream as it reaches SQL.
		with := "publish = 'insert'"
		var version int
		if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err == nil && version >= 180000 {
			with += ", publish_generated_columns = stored"
		}
		list := strings.Join(append([]string{"outbox.events"}, tables...), ", ")
		_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE %s WITH (%s)`, quoteIdent(publication), list, with))
		if err != nil {
			return fmt.Errorf("creating publication %q: %w", publication, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading publication %q: %w", publication, err)
	}
	if !pubInsert || !hasEvents {
		return fmt.Errorf("%w: publication %q must include outbox.events and publish inserts (ALTER PUBLICATION %s ADD TABLE outbox.events, SET (publish = 'insert'))",
			ErrSetup, publication, quoteIdent(publication))
	}
	return nil
}

func prepareSlot(ctx context.Context, conn *pgx.Conn, slot string) (SlotInfo, error) {
	var plugin, slotType, walStatus, invalidation string
	var confirmed, db *string
	var activePID *int
	// invalidation_reason is PostgreSQL 17's (to_jsonb reads it as NULL before).
	err := conn.QueryRow(ctx, `
		SELECT coalesce(plugin, ''), slot_type, confirmed_flush_lsn::text, database, active_pid, coalesce(wal_status, ''),
		       coalesce(pg_catalog.to_jsonb(s) ->> 'invalidation_reason', '')
		FROM pg_replication_slots s WHERE slot_name = $1`, slot).Scan(&plugin, &slotType, &confirmed, &db, &activePID, &walStatus, &invalidation)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotInfo{Created: true}, nil
	}
	if err != nil {
		return SlotInfo{}, fmt.Errorf("reading replication slot %q: %w", slot, err)
	}
	if slotType != "logical" || plugin != "pgoutput" {
		return SlotInfo{}, fmt.Errorf("%w: replication slot %q uses %s/%s; outbox-relay needs a logical pgoutput slot (drop it or choose another --slot)", ErrSetup, slot, slotType, plugin)
	}
	var current string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&current); err != nil {
		return SlotInfo{}, fmt.Errorf("reading current database: %w", err)
	}
	if db != nil && *db != current {
		return SlotInfo{}, fmt.Errorf("%w: replication slot %q belongs to database %q, not %q (choose another --slot)", ErrSetup, slot, *db, current)
	}
	if walStatus == "lost" || invalidation != "" {
		return SlotInfo{}, fmt.Errorf("%w: slot %q %s", ErrSlotInvalid, slot, invalidated(invalidation))
	}
	if activePID != nil {
		return SlotInfo{}, &SlotInUseError{Slot: slot, PID: *activePID}
	}
	info := SlotInfo{}
	if confirmed != nil {
		if info.ConfirmedFlush, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return SlotInfo{}, fmt.Errorf("parsing slot LSN %q: %w", *confirmed, err)
		}
	}
	return info, nil
}

// DropSlot drops slot if it exists and reports whether it did, on a
// connection dialed with tcpTimeout (pgdial). A slot in use is not dropped:
// the error is a *SlotInUseError.
func DropSlot(ctx context.Context, databaseURL, slot string, tcpTimeout time.Duration) (dropped bool, err error) {
	conn, err := pgdial.Connect(ctx, databaseURL, tcpTimeout)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tag, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
	if err != nil {
		if inUse := slotInUse(err, slot); inUse != nil {
			return false, inUse
		}
		return false, fmt.Errorf("dropping replication slot %q: %w", slot, err)
	}
	return tag.RowsAffected() > 0, nil
}

// slotsFull turns the server's "all replication slots are in use" into an
// ErrSetup that names max_replication_slots and the slots holding it, or
// returns nil. conn is the replication connection that tried to create
// the slot; it can still run queries.
func slotsFull(ctx context.Context, conn *pgconn.PgConn, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53400" || !strings.Contains(pgErr.Message, "replication slots") {
		return nil
	}
	held := "(could not list them)"
	res, qerr := conn.Exec(ctx, `SELECT current_setting('max_replication_slots') || ': ' || coalesce(string_agg(
		pg_catalog.format('%s (%s, %s)', slot_name, coalesce(database::text, 'physical'),
		       CASE WHEN active THEN 'active, pid ' || active_pid ELSE 'inactive' END), ', ' ORDER BY slot_name), 'none')
		FROM pg_replication_slots`).ReadAll()
	if qerr == nil && len(res) == 1 && len(res[0].Rows) == 1 {
		held = string(res[0].Rows[0][0])
	}
	return fmt.Errorf("%w: cannot create replication slot: %s (SQLSTATE %s); max_replication_slots = %s. "+
		"Drop a slot that is no longer used (SELECT pg_drop_replication_slot('name')) or raise max_replication_slots "+
		"in postgresql.conf and restart PostgreSQL", ErrSetup, pgErr.Message, pgErr.Code, held)
}

// walSendersFull marks the server's refusal of a replication connection
// past max_wal_senders with ErrWalSendersFull, and returns err.
func walSendersFull(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "53300" && strings.Contains(pgErr.Message, "max_wal_senders") {
		return fmt.Errorf("%w (raise max_wal_senders in postgresql.conf if other clients use them all): %w", ErrWalSendersFull, err)
	}
	return err
}

// slotInUse turns the server's "replication slot ... is active for PID n"
// (or "already exists", another process creating it) into a
// *SlotInUseError, or returns nil.
func slotInUse(err error, slot string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case "55006": // object_in_use
		e := &SlotInUseError{Slot: slot}
		if m := activePID.FindStringSubmatch(pgErr.Message); m != nil {
			e.PID, _ = strconv.Atoi(m[1])
		}
		return e
	case "42710": // duplicate_object: created by another process just now
		return &SlotInUseError{Slot: slot}
	}
	return nil
}

var activePID = regexp.MustCompile(`PID (\d+)`)

// slotInvalid recognises the server refusing to stream from an invalidated
// slot, or returns nil.
func slotInvalid(err error, slot string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55000" && strings.Contains(pgErr.Message, "can no longer") {
		reason := ""
		for _, r := range []string{"idle_timeout", "wal_removed", "rows_removed", "wal_level_insufficient"} {
			if strings.Contains(pgErr.Detail, r) {
				reason = r
			}
		}
		return fmt.Errorf("%w: slot %q: %s (%s); it %s", ErrSlotInvalid, slot, pgErr.Message, pgErr.Detail, invalidated(reason))
	}
	return nil
}

// invalidated says why the server invalidated a slot, naming the setting
// that did it, from pg_replication_slots.invalidation_reason (PostgreSQL
// 17 and newer; "" before, when WAL removal is the only cause).
func invalidated(reason string) string {
	switch reason {
	case "idle_timeout":
		return "was inactive for longer than idle_replication_slot_timeout (PostgreSQL 18), and the server invalidated it; " +
			"raise the setting, or keep a relay (or a standby relay) running"
	case "rows_removed":
		return "needed rows the server removed (on a standby: turn hot_standby_feedback on, with primary_slot_name)"
	case "wal_level_insufficient":
		return "needs wal_level=logical on the primary"
	}
	return "fell behind by more than max_slot_wal_keep_size and the server removed the WAL it needed"
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteLiteral quotes a PostgreSQL string literal, for statements that
// take no parameters (replication commands, SET TRANSACTION SNAPSHOT).
func QuoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
