package postgres

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
)

// kv is a changelog row of the upsert tests.
type kv struct {
	Kind connector.RowKind
	Key  string
	N    int64
}

func kvRow(c kv) (connector.RowKind, []any) { return c.Kind, []any{c.Key, c.N} }

func upsertConfig(table string) UpsertConfig[kv] {
	return UpsertConfig[kv]{
		URL: testURL(), Table: table, Columns: []string{"k", "n"}, Key: []string{"k"},
		Row: kvRow, Timeout: 30 * time.Second,
	}
}

func openUpsert(t testing.TB, cfg UpsertConfig[kv]) *UpsertWriter[kv] {
	t.Helper()
	s, err := NewUpsertSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(clink.SinkContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w.(*UpsertWriter[kv])
}

func writeAll(t testing.TB, w *UpsertWriter[kv], rows ...kv) {
	t.Helper()
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatalf("writing %v: %v", r, err)
		}
	}
}

func tableKV(t testing.TB, conn *pgx.Conn, table string) []string {
	t.Helper()
	return queryStrings(t, conn, "SELECT k || '=' || n FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY k")
}

func TestUpsertNettingAndFlush(t *testing.T) {
	const table = "clink_upsert_netting"
	newTable(t, table, "k text PRIMARY KEY, n bigint NOT NULL", "upsert_netting")
	conn := admin(t)
	mustExec(t, conn, "INSERT INTO "+table+" VALUES ('b', 1), ('c', 1), ('d', 1), ('f', 1)")
	w := openUpsert(t, upsertConfig(table))
	I, UB, UA, D := connector.Insert, connector.UpdateBefore, connector.UpdateAfter, connector.Delete
	writeAll(t, w,
		kv{I, "a", 1}, kv{UB, "a", 1}, kv{UA, "a", 2}, // inserted, then updated
		kv{UB, "b", 1}, kv{UA, "b", 2}, // updated: the -U is netted away
		kv{D, "c", 1},                // deleted
		kv{UB, "d", 1},               // -U without a +U: deleted
		kv{I, "e", 1}, kv{D, "e", 1}, // inserted and deleted within the flush
		kv{D, "f", 1}, kv{I, "f", 5}, // deleted and inserted again
		kv{D, "g", 0}, // a delete of a key the table does not hold
	)
	if got := tableKV(t, conn, table); !slices.Equal(got, []string{"b=1", "c=1", "d=1", "f=1"}) {
		t.Fatalf("before the flush the table changed: %v", got)
	}
	if len(w.changes) != 7 {
		t.Errorf("buffer holds %d changes, want one per key (7)", len(w.changes))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a=2", "b=2", "f=5"}
	if got := tableKV(t, conn, table); !slices.Equal(got, want) {
		t.Fatalf("after the flush: %v, want %v", got, want)
	}
	// A replay of the same changes converges to the same table.
	writeAll(t, w, kv{UB, "b", 1}, kv{UA, "b", 2}, kv{I, "f", 5}, kv{D, "c", 1})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := tableKV(t, conn, table); !slices.Equal(got, want) {
		t.Fatalf("after a replay: %v, want %v", got, want)
	}
	// Close flushes.
	writeAll(t, w, kv{UA, "z", 9})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tableKV(t, conn, table); !slices.Equal(got, append(want, "z=9")) {
		t.Fatalf("after close: %v", got)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestUpsertEarlyFlushAndCompositeKey(t *testing.T) {
	const table = "clink_upsert_composite"
	newTable(t, table, "a text, b bigint, v text, PRIMARY KEY (a, b)", "upsert_composite")
	conn := admin(t)
	type rec struct {
		kind connector.RowKind
		a    string
		b    int64
		v    string
	}
	s, err := NewUpsertSink(UpsertConfig[rec]{
		URL: testURL(), Table: table, Columns: []string{"a", "b", "v"}, Key: []string{"b", "a"},
		Row:             func(r rec) (connector.RowKind, []any) { return r.kind, []any{r.a, r.b, r.v} },
		MaxBufferedKeys: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(clink.SinkContext{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, r := range []rec{
		{connector.Insert, "x", 1, "one"}, {connector.Insert, "x", 2, "two"}, {connector.UpdateAfter, "x", 1, "uno"},
		{connector.Insert, "y", 1, "y1"}, // the third key: an early flush
		{connector.Delete, "x", 2, ""},
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	got := queryStrings(t, conn, "SELECT a || b || '=' || v FROM "+table+" ORDER BY a, b")
	if want := []string{"x1=uno", "x2=two", "y1=y1"}; !slices.Equal(got, want) {
		t.Fatalf("after the early flush: %v, want %v", got, want)
	}
	if err := w.(*UpsertWriter[rec]).Flush(); err != nil {
		t.Fatal(err)
	}
	got = queryStrings(t, conn, "SELECT a || b || '=' || v FROM "+table+" ORDER BY a, b")
	if want := []string{"x1=uno", "y1=y1"}; !slices.Equal(got, want) {
		t.Fatalf("after the flush: %v, want %v", got, want)
	}
}

func TestUpsertKeyOnlyTable(t *testing.T) {
	const table = "clink_upsert_keyonly"
	newTable(t, table, "k text PRIMARY KEY", "upsert_keyonly")
	s, err := NewUpsertSink(UpsertConfig[kv]{
		URL: testURL(), Table: table, Columns: []string{"k"}, Key: []string{"k"},
		Row: func(c kv) (connector.RowKind, []any) { return c.Kind, []any{c.Key} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.upsert, "DO NOTHING") {
		t.Errorf("upsert of a key-only table: %s", s.upsert)
	}
	w, _ := s.Open(clink.SinkContext{})
	defer w.Close()
	for i := range 3 {
		for _, k := range []string{"a", "b"} {
			if err := w.Write(kv{Kind: connector.Insert, Key: k}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.(*UpsertWriter[kv]).Flush(); err != nil {
			t.Fatalf("flush %d: %v", i, err)
		}
	}
	if got := queryStrings(t, admin(t), "SELECT k FROM "+table+" ORDER BY k"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("table: %v", got)
	}
}

func TestUpsertErrors(t *testing.T) {
	good := upsertConfig("t")
	for _, tc := range []struct {
		name string
		edit func(c *UpsertConfig[kv])
		want string
	}{
		{"no key", func(c *UpsertConfig[kv]) { c.Key = nil }, "needs key columns"},
		{"key not a column", func(c *UpsertConfig[kv]) { c.Key = []string{"x"} }, `key column "x"`},
		{"no row", func(c *UpsertConfig[kv]) { c.Row = nil }, "Row"},
		{"no url", func(c *UpsertConfig[kv]) { c.URL = "" }, "connection URL"},
		{"no columns", func(c *UpsertConfig[kv]) { c.Columns = nil }, "no columns"},
	} {
		c := good
		tc.edit(&c)
		if _, err := NewUpsertSink(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}

	const table = "clink_upsert_errors"
	newTable(t, table, "k text PRIMARY KEY, n bigint NOT NULL", "upsert_errors")
	w := openUpsert(t, upsertConfig(table))
	if err := w.Write(kv{Kind: 9, Key: "a"}); err == nil || !strings.Contains(err.Error(), table) {
		t.Errorf("unknown row kind: %v", err)
	}
	cfg := upsertConfig(table)
	cfg.Row = func(c kv) (connector.RowKind, []any) { return c.Kind, []any{nil, c.N} }
	w2 := openUpsert(t, cfg)
	if err := w2.Write(kv{}); err == nil || !strings.Contains(err.Error(), "NULL in key column k") {
		t.Errorf("NULL key: %v", err)
	}
	cfg = upsertConfig("clink_upsert_no_such_table")
	w3 := openUpsert(t, cfg)
	if err := w3.Write(kv{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := w3.Flush(); err == nil || !strings.Contains(err.Error(), "clink_upsert_no_such_table") {
		t.Errorf("flush into a missing table: %v", err)
	}
}

func TestAppendKeyTellsValuesApart(t *testing.T) {
	vals := [][]any{{"a", "b"}, {"ab", ""}, {"", "ab"}, {int64(1), "1"}, {"1", int64(1)}, {int64(12), ""}, {"a\x00", ""}, {[]byte("a"), ""}}
	seen := map[string]int{}
	for i, v := range vals {
		var b []byte
		for _, x := range v {
			var err error
			if b, err = appendKey(b, keyInstant, x); err != nil {
				t.Fatal(err)
			}
		}
		if j, dup := seen[string(b)]; dup {
			t.Errorf("keys %v and %v encode alike", vals[j], v)
		}
		seen[string(b)] = i
	}
}
