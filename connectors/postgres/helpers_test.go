package postgres

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testURL is the server the tests use: CLINK_POSTGRES_URL, or the local
// development server.
func testURL() string {
	if u := os.Getenv("CLINK_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// admin opens a connection of the test's own, closed at cleanup.
func admin(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), testURL())
	if err != nil {
		t.Fatalf("connecting to the test server %s (start it, or set CLINK_POSTGRES_URL): %v", testURL(), err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newTable creates table name with the given column definitions, dropping
// an earlier one, and drops it (and rolls back the prepared transactions
// of uid) when the test ends.
func newTable(t testing.TB, name, columns, uid string) {
	t.Helper()
	conn := admin(t)
	rollbackPrepared(t, conn, uid)
	mustExec(t, conn, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	mustExec(t, conn, "CREATE TABLE "+pgx.Identifier{name}.Sanitize()+" ("+columns+")")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), testURL())
		if err != nil {
			t.Errorf("cleaning up table %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		rollbackPrepared(t, conn, uid)
		if _, err := conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("dropping table %s: %v", name, err)
		}
	})
}

// preparedOf lists the prepared transactions of sink uid, sorted.
func preparedOf(t testing.TB, conn *pgx.Conn, uid string) []string {
	t.Helper()
	rows, err := conn.Query(testCtx(t), "SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, $1)", gidPrefix(uid))
	if err != nil {
		t.Fatal(err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, g := range gids {
		if _, ok := parseGID(uid, g); ok {
			own = append(own, g)
		}
	}
	slices.Sort(own)
	return own
}

func rollbackPrepared(t testing.TB, conn *pgx.Conn, uid string) {
	t.Helper()
	for _, gid := range preparedOf(t, conn, uid) {
		if _, err := conn.Exec(context.Background(), "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil && !isCode(err, codeUndefinedObject) {
			t.Errorf("rolling back %s: %v", gid, err)
		}
	}
}

// strings returns the rows of a one-column text query.
func queryStrings(t testing.TB, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(testCtx(t), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}
