package migrations_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
	"github.com/outbox-relay/outbox-relay/migrations"
)

func TestMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("UpDownUpLeavesTheSameSchema", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Pool(t, pgtest.NewDB(t))
		if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != migrations.Latest() {
			t.Fatalf("first Up: applied %v, err %v", applied, err)
		}
		if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != 0 {
			t.Fatalf("second Up applied %v (err %v), want nothing", applied, err)
		}
		if _, err := migrations.Down(ctx, pool, 0); err != nil {
			t.Fatalf("Down: %v", err)
		}
		if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'outbox' AND tablename <> 'schema_migrations'`); n != 0 {
			t.Fatalf("%d outbox tables left after Down to 0", n)
		}
		if n := pgtest.Count(t, pool, `SELECT count(*) FROM pg_publication`); n != 0 {
			t.Fatalf("%d publications left after Down to 0", n)
		}
		if _, err := migrations.Up(ctx, pool); err != nil {
			t.Fatalf("Up after Down: %v", err)
		}
		if v, err := migrations.Current(ctx, pool); err != nil || v != migrations.Latest() {
			t.Fatalf("Current = %d (err %v), want %d", v, err, migrations.Latest())
		}
	})

	t.Run("TwoProcessesMigratingAtOnceBothSucceed", func(t *testing.T) {
		t.Parallel()
		dbURL := pgtest.NewDB(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := pgx.Connect(ctx, dbURL)
				if err != nil {
					errs[i] = err
					return
				}
				defer conn.Close(ctx)
				_, errs[i] = migrations.Up(ctx, conn)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("migrator %d: %v", i, err)
			}
		}
		pool := pgtest.Pool(t, dbURL)
		if n := pgtest.Count(t, pool, `SELECT count(*) FROM outbox.schema_migrations`); n != migrations.Latest() {
			t.Fatalf("%d versions recorded, want %d", n, migrations.Latest())
		}
	})

	t.Run("PrintedSQLBuildsTheSchemaAndRecordsItsVersions", func(t *testing.T) {
		t.Parallel()
		var buf bytes.Buffer
		if err := migrations.Print(&buf); err != nil {
			t.Fatal(err)
		}
		pool := pgtest.Pool(t, pgtest.NewDB(t))
		if _, err := pool.Exec(ctx, buf.String()); err != nil {
			t.Fatalf("applying printed SQL: %v", err)
		}
		if applied, err := migrations.Up(ctx, pool); err != nil || len(applied) != 0 {
			t.Fatalf("Up after the printed SQL applied %v (err %v), want nothing", applied, err)
		}
		if !strings.Contains(buf.String(), "CREATE TABLE outbox.deliveries") {
			t.Fatal("printed SQL lacks outbox.deliveries")
		}
	})
}
