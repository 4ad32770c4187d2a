package mapping

import (
	"context"
	_ "embed" // the statements
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-relay/outbox-relay/cdc"
)

var (
	//go:embed sql/columns.sql
	columnsSQL string
	//go:embed sql/published.sql
	publishedSQL string
)

// Querier runs the catalog queries: a *pgx.Conn, a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// BadConfig lists everything wrong with the mapped tables at once.
type BadConfig struct {
	Problems []string
	// Unpublished are the tables (quoted names) missing from the
	// publication, each also in Problems.
	Unpublished []string
}

func (b *BadConfig) Error() string {
	return fmt.Sprintf("the table mapping does not fit the database (%d problem(s)):\n  %s",
		len(b.Problems), strings.Join(b.Problems, "\n  "))
}

// Check reads each mapped table from the catalog and checks its mapping:
// every column exists with a type the relay can read, the id column is
// unique, the table is in the publication (if that exists: the relay
// creates it with the mapped tables). It remembers which columns are
// NOT NULL (the JSON converter's schemas say so). Problems come back as
// *BadConfig; a failed query as itself.
func Check(ctx context.Context, db Querier, publication string, tables []*Table) error {
	bad := &BadConfig{}
	for _, t := range tables {
		if t.IsEvents() {
			continue
		}
		problems, published, err := t.check(ctx, db, publication)
		if err != nil {
			return err
		}
		bad.Problems = append(bad.Problems, problems...)
		if !published {
			bad.Unpublished = append(bad.Unpublished, t.Ident())
		}
	}
	if len(bad.Problems) > 0 {
		return bad
	}
	return nil
}

type catalogColumn struct {
	oid                        uint32
	notNull, unique, generated bool
	defaultExpr                *string
	typmod                     int32
}

func (t *Table) check(ctx context.Context, db Querier, publication string) (problems []string, published bool, err error) {
	rows, err := db.Query(ctx, columnsSQL, t.Schema, t.Name)
	if err != nil {
		return nil, false, fmt.Errorf("reading the columns of %s: %w", t.QualifiedName(), err)
	}
	cols := map[string]catalogColumn{}
	var rel cdc.Relation
	for rows.Next() {
		var name string
		var oid int64
		var c catalogColumn
		if err := rows.Scan(&name, &oid, &c.notNull, &c.unique, &c.generated, &c.defaultExpr, &c.typmod); err != nil {
			return nil, false, fmt.Errorf("reading the columns of %s: %w", t.QualifiedName(), err)
		}
		c.oid = uint32(oid) //nolint:gosec // an OID
		cols[name] = c
		rel.Columns = append(rel.Columns, cdc.Column{Name: name, TypeOID: c.oid})
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("reading the columns of %s: %w", t.QualifiedName(), err)
	}
	where := t.Origin
	if len(cols) == 0 {
		return []string{fmt.Sprintf("%s: table %s does not exist (or is not a table)", where, t.QualifiedName())}, true, nil
	}
	read := &catalog{notNull: map[string]bool{}, defaults: map[string]string{},
		ordered: cols[OrderCreatedAt].oid == OIDTimestamptz && cols[OrderSeq].oid == OIDInt8, payloadOID: cols[t.Payload].oid}
	defer t.catalog.Store(read)
	for _, u := range t.Columns() {
		c, ok := cols[u.Column]
		option := t.option(u.Use)
		switch {
		case !ok && t.PlacementsIfPresent && u.placement():
			continue // left out, as Debezium's table.field.additional.missing=ignore does
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: %s names column %q (%s), which %s does not have",
				where, option, u.Column, u.Use, t.QualifiedName()))
			continue
		case c.generated:
			problems = append(problems, fmt.Sprintf("%s: %s: column %q of %s is generated; the stream does not carry it",
				where, option, u.Column, t.QualifiedName()))
		}
		if err := readable(u, c.oid, t); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s: %v", where, option, err))
		}
		if t.Debezium && u.Use != "timestamp" && (c.oid == OIDTimestamp || c.oid == OIDTimestamptz) && c.typmod >= 0 && c.typmod < 6 {
			problems = append(problems, fmt.Sprintf("%s: %s: column %q of %s is %s(%d): Debezium writes such a column "+
				"with its own precision (milliseconds, or %d fraction digits), which the relay does not: give it the default precision",
				where, option, u.Column, t.QualifiedName(), TypeName(c.oid), c.typmod, c.typmod))
		}
		if u.Use == "id" && !c.unique {
			problems = append(problems, fmt.Sprintf("%s: %s: column %q of %s is not unique: give it a primary key or unique index of its own",
				where, option, u.Column, t.QualifiedName()))
		}
		read.notNull[u.Column] = c.notNull
		if c.defaultExpr != nil {
			read.defaults[u.Column] = *c.defaultExpr
		}
	}
	if publication == "" { // poll mode: no stream
		return problems, true, nil
	}
	// A publication that does not exist yet is created with the table.
	var exists bool
	if err := db.QueryRow(ctx, publishedSQL, publication, t.Schema, t.Name).Scan(&exists, &published); err != nil {
		return nil, false, fmt.Errorf("reading publication %q: %w", publication, err)
	}
	published = published || !exists
	if !published {
		problems = append(problems, fmt.Sprintf("%s: table %s is not in publication %s; run: ALTER PUBLICATION %s ADD TABLE %s",
			where, t.QualifiedName(), publication, pgx.Identifier{publication}.Sanitize(), t.Ident()))
	}
	return problems, published, nil
}

// GrantSQL gives the relay's group role what it needs on t: SELECT, for
// the backfill, the gap sweep and poll mode (the stream needs nothing).
func (t *Table) GrantSQL() string {
	return fmt.Sprintf("GRANT SELECT ON %s TO outbox_relay;", t.Ident())
}

// option names the configuration option behind a use of a column.
func (t *Table) option(use string) string {
	if o := t.Options[use]; o != "" {
		return o
	}
	if strings.HasPrefix(use, "placed as ") || use == "partition" {
		if o := t.Options["placed"]; o != "" {
			return o
		}
	}
	return use
}

// PublicationSQL is the statement that adds t to publication unless it is
// in it already, creating the publication (with outbox.events, inserts
// only, as the relay creates it) when it does not exist yet, so that
// `migrate` works before the relay's first start: what `migrate` runs and
// `migrate --print` prints for a mapped table. Besides the order columns
// (OrderSQL), the relay adds nothing to the table (no trigger): it reads
// the stream and keeps its own copies.
func (t *Table) PublicationSQL(publication string) string {
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	pub := pgx.Identifier{publication}.Sanitize()
	create := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE outbox.events, %s WITH (publish = 'insert'", pub, t.Ident())
	return fmt.Sprintf(`DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = %s) THEN
        EXECUTE %s || CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 180000
                          THEN ', publish_generated_columns = stored)' ELSE ')' END;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s AND tablename = %s) THEN
        ALTER PUBLICATION %s ADD TABLE %s;
    END IF;
END $$;`, lit(publication), lit(create), lit(publication), lit(t.Schema), lit(t.Name), pub, t.Ident())
}
