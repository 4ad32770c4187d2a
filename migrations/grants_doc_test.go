package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-relay/outbox-relay/internal/pgtest"
)

// groups are the outbox's group roles, in the grants table's column order.
var groups = []string{"outbox_writer", "outbox_operator", "outbox_relay"}

// grantsHeader opens the table of the groups' grants in docs/running.md
// (Roles and privileges).
const grantsHeader = "| object | `outbox_writer` | `outbox_operator` | `outbox_relay` |"

func TestRoles_TheDocumentedGrantsTableIsWhatTheCatalogSays(t *testing.T) {
	t.Parallel()
	_, pool := pgtest.Migrated(t) // migrated with the roles
	want := grantsTable(t, pool)
	page, err := os.ReadFile("../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	got := grantsTableOf(string(page))
	if got == "" {
		t.Fatalf("docs/running.md has no table that starts %q; it should be:\n%s", grantsHeader, want)
	}
	if got != want {
		t.Errorf("docs/running.md's grants table (Roles and privileges) is not what migrate grants; replace it with:\n%s\ndocs/running.md has:\n%s", want, got)
	}
}

// grantsTableOf returns the lines of page's table that starts with grantsHeader.
func grantsTableOf(page string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		switch {
		case l == grantsHeader:
			out = append(out, l)
		case len(out) > 0 && strings.HasPrefix(l, "|"):
			out = append(out, l)
		case len(out) > 0:
			return strings.Join(out, "\n")
		}
	}
	return strings.Join(out, "\n")
}

// grantsTable writes, from the catalog, what each group may do on the
// outbox schema and on each of its objects: table, view and sequence
// privileges (column lists where a role has a column's only), and EXECUTE
// on the functions PUBLIC may not call.
func grantsTable(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	rows := [][]string{{"schema `outbox`"}}
	for _, g := range groups {
		rows[0] = append(rows[0], cell(privileges(t, pool, `SELECT p FROM unnest(ARRAY['USAGE', 'CREATE']) p
			WHERE has_schema_privilege($1, 'outbox', p)`, g)))
	}
	rels, err := pool.Query(ctx, `SELECT c.oid::regclass::text, c.relkind = 'S' FROM pg_class c
		WHERE c.relnamespace = 'outbox'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
		ORDER BY c.relkind = 'S', c.relkind IN ('v', 'm'), c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	type rel struct {
		name string
		seq  bool
	}
	var list []rel
	for rels.Next() {
		var r rel
		if err := rels.Scan(&r.name, &r.seq); err != nil {
			t.Fatal(err)
		}
		list = append(list, r)
	}
	if err := rels.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		row := []string{"`" + r.name + "`"}
		for _, g := range groups {
			// Column privileges exist for SELECT, INSERT, UPDATE and
			// REFERENCES only.
			q := `SELECT p || CASE WHEN has_table_privilege($1, $2::regclass, p) THEN '' ELSE ' (' ||
			          (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a
			           WHERE a.attrelid = $2::regclass AND a.attnum > 0 AND NOT a.attisdropped
			             AND has_column_privilege($1, a.attrelid, a.attnum, p)) || ')' END
			      FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) WITH ORDINALITY AS x(p, i)
			      WHERE CASE WHEN has_table_privilege($1, $2::regclass, p) THEN true
			                 WHEN p IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES') THEN has_any_column_privilege($1, $2::regclass, p)
			                 ELSE false END
			      ORDER BY i`
			if r.seq {
				q = `SELECT p FROM unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) WITH ORDINALITY AS x(p, i)
				     WHERE has_sequence_privilege($1, $2::regclass, p) ORDER BY i`
			}
			ps := privileges(t, pool, q, g, r.name)
			row = append(row, cell(ps))
		}
		rows = append(rows, row)
	}
	// Functions PUBLIC may not call, by name (overloads together).
	funcs, err := pool.Query(ctx, `SELECT p.proname, string_agg(DISTINCT g.r || '=' || has_function_privilege(g.r, p.oid, 'EXECUTE'), ',')
		FROM pg_proc p, unnest($1::text[]) g(r)
		WHERE p.pronamespace = 'outbox'::regnamespace
		  AND p.proacl IS NOT NULL AND NOT EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
		GROUP BY p.proname ORDER BY p.proname`, groups)
	if err != nil {
		t.Fatal(err)
	}
	defer funcs.Close()
	for funcs.Next() {
		var name, may string
		if err := funcs.Scan(&name, &may); err != nil {
			t.Fatal(err)
		}
		row := []string{"`outbox." + name + "()`"}
		for _, g := range groups {
			switch {
			case strings.Contains(may, g+"=true") && strings.Contains(may, g+"=false"):
				t.Fatalf("%s may call some overloads of outbox.%s, not all: %s", g, name, may)
			case strings.Contains(may, g+"=true"):
				row = append(row, "EXECUTE")
			default:
				row = append(row, "no")
			}
		}
		rows = append(rows, row)
	}
	if err := funcs.Err(); err != nil {
		t.Fatal(err)
	}
	lines := []string{grantsHeader, "|---|---|---|---|"}
	for _, r := range rows {
		lines = append(lines, "| "+strings.Join(r, " | ")+" |")
	}
	return strings.Join(lines, "\n")
}

func privileges(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func cell(ps []string) string {
	if len(ps) == 0 {
		return "no"
	}
	return strings.Join(ps, ", ")
}
