package mapping

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The order columns a mapped table may have (OrderSQL adds them): what the
// paths that read the table itself rather than the stream need. The backfill
// of a new slot, the gap sweep and poll mode walk a table's rows without a
// status row by (outbox_created_at, outbox_seq), the walk outbox.events has
// by (created_at, seq), and every event's key order is its outbox_seq. A
// mapped table without them is relayed from the stream alone.
const (
	// OrderCreatedAt is the start of the inserting transaction (now()),
	// which the gap sweep's horizon compares with open transactions.
	OrderCreatedAt = "outbox_created_at"
	// OrderSeq is the insertion order, from a sequence. Rows from before
	// the column existed have none: they are taken as relayed by whatever
	// relayed the table before.
	OrderSeq = "outbox_seq"
)

// Ordered reports whether Check found t's order columns.
func (t *Table) Ordered() bool {
	c := t.catalog.Load()
	return c != nil && c.ordered
}

// Sequence is the quoted name of the sequence behind t's outbox_seq.
func (t *Table) Sequence() string {
	return pgx.Identifier{t.Schema, t.Name + "_" + OrderSeq}.Sanitize()
}

// OrderIndex is the quoted name of the index on t's order columns.
func (t *Table) OrderIndex() string {
	return pgx.Identifier{t.Name + "_outbox_order_idx"}.Sanitize()
}

// OrderSQL is what gives t its order columns, statement by statement: what
// `migrate` runs for a mapped table and `migrate --print` prints. None
// rewrites the table: outbox_created_at's default (now()) is not volatile,
// so existing rows take the time of the ALTER from the catalog; outbox_seq
// gets its default after it is added, so existing rows keep none; the index
// is built CONCURRENTLY (outside a transaction). Every statement is
// idempotent. Roles that may insert into the table are given the sequence,
// which the new default calls.
func (t *Table) OrderSQL() []string {
	tbl, seq := t.Ident(), t.Sequence()
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return []string{
		fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s timestamptz NOT NULL DEFAULT now();", tbl, OrderCreatedAt),
		fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s bigint;", tbl, OrderSeq),
		fmt.Sprintf("CREATE SEQUENCE IF NOT EXISTS %s OWNED BY %s.%s;", seq, tbl, OrderSeq),
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT pg_catalog.nextval(%s::pg_catalog.regclass);", tbl, OrderSeq, lit(seq)),
		fmt.Sprintf(`DO $$
DECLARE r text;
BEGIN
    FOR r IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END
             FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
             WHERE c.oid = %s::pg_catalog.regclass AND a.privilege_type = 'INSERT' LOOP
        EXECUTE pg_catalog.format('GRANT USAGE ON SEQUENCE %%s TO %%s', %s::text, r);
    END LOOP;
END $$;`, lit(tbl), lit(seq)),
		fmt.Sprintf("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON %s (%s, %s);", t.OrderIndex(), tbl, OrderCreatedAt, OrderSeq),
	}
}
