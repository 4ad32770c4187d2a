package cdc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// ErrSetup marks problems an operator must fix (wal_level, version, a slot of
// the wrong plugin, a publication that does not publish outbox inserts);
// retrying does not help.
var ErrSetup = errors.New("replication setup")

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
func Prepare(ctx context.Context, conn *pgx.Conn, slot, publication string) (SlotInfo, error) {
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
	var hasTable bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('outbox.events') IS NOT NULL`).Scan(&hasTable); err != nil {
		return SlotInfo{}, fmt.Errorf("looking for outbox.events: %w", err)
	}
	if !hasTable {
		return SlotInfo{}, fmt.Errorf("%w: table outbox.events does not exist; run `outbox-relay migrate` first", ErrSetup)
	}
	if err := preparePublication(ctx, conn, publication); err != nil {
		return SlotInfo{}, err
	}
	return prepareSlot(ctx, conn, slot)
}

func preparePublication(ctx context.Context, conn *pgx.Conn, publication string) error {
	var pubInsert, hasEvents bool
	err := conn.QueryRow(ctx, `
		SELECT p.pubinsert,
		       EXISTS (SELECT 1 FROM pg_publication_tables t
		               WHERE t.pubname = p.pubname AND t.schemaname = 'outbox' AND t.tablename = 'events')
		FROM pg_publication p WHERE p.pubname = $1`, publication).Scan(&pubInsert, &hasEvents)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE PUBLICATION %s FOR TABLE outbox.events WITH (publish = 'insert')`, quoteIdent(publication)))
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
	var plugin, slotType string
	var confirmed *string
	var db *string
	err := conn.QueryRow(ctx, `
		SELECT coalesce(plugin, ''), slot_type, confirmed_flush_lsn::text, database
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&plugin, &slotType, &confirmed, &db)
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
		return SlotInfo{}, fmt.Errorf("%w: replication slot %q belongs to database %q, not %q", ErrSetup, slot, *db, current)
	}
	info := SlotInfo{}
	if confirmed != nil {
		if info.ConfirmedFlush, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return SlotInfo{}, fmt.Errorf("parsing slot LSN %q: %w", *confirmed, err)
		}
	}
	return info, nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// quoteLiteral quotes a PostgreSQL string literal.
func quoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}
