package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/internal/store"
)

// The relay's role (not superuser, no pg_read_all_stats) cannot read when
// another role's transaction started; the horizon still never passes it.
func TestHorizon_WithoutPrivilegeNeverPassesAnotherRolesOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, admin := pgtest.Migrated(t)
	st := store.New(pgtest.Pool(t, pgtest.RelayURL(dbURL)))
	writer, err := admin.Acquire(ctx) // superuser: its xact_start is hidden from the relay
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Release()
	begin := func() (start time.Time) {
		t.Helper()
		if _, err := writer.Exec(ctx, `BEGIN`); err != nil {
			t.Fatal(err)
		}
		if err := writer.QueryRow(ctx, `SELECT now()`).Scan(&start); err != nil {
			t.Fatal(err)
		}
		return start
	}
	commit := func() {
		t.Helper()
		if _, err := writer.Exec(ctx, `COMMIT`); err != nil {
			t.Fatal(err)
		}
	}

	// Open before the relay first looks: its start is unknown, and the
	// horizon stays behind everything until it ends.
	begin()
	var first store.Horizon
	upper, _, err := first.Look(ctx, st, 0, 0)
	if err != nil || upper.After(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("a transaction open before the first look: horizon %s (%v), want it held far back", upper, err)
	}
	commit()
	if upper, _, err = first.Look(ctx, st, 0, 0); err != nil || time.Since(upper) > time.Minute {
		t.Fatalf("once it ended: horizon %s (%v), want about now", upper, err)
	}

	// Opened between two looks: the horizon stops before its start.
	var h store.Horizon
	if _, _, err := h.Look(ctx, st, 0, 0); err != nil {
		t.Fatal(err)
	}
	start := begin()
	for range 3 { // and stays there while it is open
		time.Sleep(20 * time.Millisecond) // time passes between looks; nothing to wait for
		if upper, _, err = h.Look(ctx, st, 0, 0); err != nil || !upper.Before(start) {
			t.Fatalf("horizon %s (%v) with a transaction open since %s: want before it", upper, err, start)
		}
	}
	commit()
	if upper, _, err = h.Look(ctx, st, 0, 0); err != nil || !upper.After(start) {
		t.Fatalf("once it ended: horizon %s (%v), want past %s", upper, err, start)
	}
}
