package postgres

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
)

// tsRow is a changelog row keyed by a time.
type tsRow struct {
	Kind connector.RowKind
	At   time.Time
	N    int64
}

func openTS(t *testing.T, table string) *UpsertWriter[tsRow] {
	t.Helper()
	s, err := NewUpsertSink(UpsertConfig[tsRow]{
		URL: testURL(), Table: table, Columns: []string{"at", "n"}, Key: []string{"at"},
		Row:     func(r tsRow) (connector.RowKind, []any) { return r.Kind, []any{r.At, r.N} },
		Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(clink.SinkContext{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w.(*UpsertWriter[tsRow])
}

// TestUpsertTimeKeyInZones: the same instant in two zones is one key of a
// timestamptz column. Netted apart, +I(UTC) -D(Berlin) +I(UTC) would send
// the upsert before the delete and lose the row.
func TestUpsertTimeKeyInZones(t *testing.T) {
	const table = "clink_upsert_tskey"
	newTable(t, table, "at timestamptz PRIMARY KEY, n bigint NOT NULL", "upsert_tskey")
	conn := admin(t)
	w := openTS(t, table)
	berlin := time.FixedZone("CET", 3600)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := time.Now() // carries a monotonic reading
	for _, r := range []tsRow{
		{connector.Insert, at, 1}, {connector.Delete, at.In(berlin), 1}, {connector.Insert, at, 2},
		{connector.Insert, now, 1}, {connector.Delete, now.Round(0).In(berlin), 1}, {connector.Insert, now.UTC(), 2},
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.changes) != 2 {
		t.Errorf("buffer holds %d changes, want 2 (one per instant)", len(w.changes))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := queryStrings(t, conn, "SELECT n::text FROM "+table+" ORDER BY at"); !slices.Equal(got, []string{"2", "2"}) {
		t.Errorf("rows %v, want both keys at 2", got)
	}
}

// TestUpsertWallClockKey: a timestamp (without time zone) column compares
// wall clocks, which is what pgx sends; two zones' same wall clock is one
// key there, and the same instant in two zones is two.
func TestUpsertWallClockKey(t *testing.T) {
	const table = "clink_upsert_wallkey"
	newTable(t, table, "at timestamp PRIMARY KEY, n bigint NOT NULL", "upsert_wallkey")
	conn := admin(t)
	w := openTS(t, table)
	berlin := time.FixedZone("CET", 3600)
	wallUTC := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	wallBerlin := time.Date(2026, 3, 1, 12, 0, 0, 0, berlin)
	for _, r := range []tsRow{
		{connector.Insert, wallUTC, 1}, {connector.Delete, wallBerlin, 1}, {connector.Insert, wallUTC, 2},
		{connector.Insert, wallUTC.In(berlin), 7}, // 13:00 on the wall: another row
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := queryStrings(t, conn, "SELECT to_char(at, 'HH24:MI') || '=' || n FROM "+table+" ORDER BY at")
	if want := []string{"12:00=2", "13:00=7"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}

func TestAppendKeyNormalises(t *testing.T) {
	enc := func(kind keyKind, v any) string {
		b, err := appendKey(nil, kind, v)
		if err != nil {
			t.Fatalf("appendKey(%#v): %v", v, err)
		}
		return string(b)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	zone := time.FixedZone("X", -5*3600)
	for _, tc := range []struct {
		name string
		kind keyKind
		a, b any
		same bool
	}{
		{"instant in two zones", keyInstant, at, at.In(zone), true},
		{"monotonic reading", keyInstant, time.Unix(5, 0), time.Unix(5, 0).Round(0), true},
		{"below a microsecond", keyInstant, at, at.Add(1), true},
		{"a microsecond apart", keyInstant, at, at.Add(time.Microsecond), false},
		{"wall clock in two zones", keyWallClock, at, at.In(zone), false},
		{"same wall clock", keyWallClock, at, time.Date(2026, 3, 1, 12, 0, 0, 123456789, zone), true},
		{"same date", keyDate, at, time.Date(2026, 3, 1, 23, 0, 0, 0, zone), true},
		{"int widths", keyInstant, int16(7), int64(7), true},
		{"unsigned", keyInstant, uint32(7), int(7), true},
		{"large unsigned", keyInstant, uint64(math.MaxUint64), int64(-1), false},
		{"zero signs", keyInstant, math.Copysign(0, -1), 0.0, true},
		{"int and string", keyInstant, int64(1), "1", false},
	} {
		if got := enc(tc.kind, tc.a) == enc(tc.kind, tc.b); got != tc.same {
			t.Errorf("%s: %#v and %#v encode alike = %v, want %v", tc.name, tc.a, tc.b, got, tc.same)
		}
	}
}

func TestUpsertRejectsAmbiguousKeys(t *testing.T) {
	const table = "clink_upsert_badkey"
	newTable(t, table, "k bigint PRIMARY KEY, n bigint NOT NULL", "upsert_badkey")
	n := int64(3)
	for _, tc := range []struct {
		name string
		key  any
		want string
	}{
		{"pointer", &n, "pointer"},
		{"NaN", math.NaN(), "NaN"},
		{"float32 NaN", float32(math.NaN()), "NaN"},
		{"map", map[string]int{}, "map"},
	} {
		cfg := upsertConfig(table)
		cfg.Columns, cfg.Key = []string{"k", "n"}, []string{"k"}
		cfg.Row = func(kv) (connector.RowKind, []any) { return connector.Insert, []any{tc.key, int64(1)} }
		w := openUpsert(t, cfg)
		err := w.Write(kv{})
		if err == nil || !strings.Contains(err.Error(), "key column k") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), table) {
			t.Errorf("%s: %v, want an error naming the table, key column k and %q", tc.name, err, tc.want)
		}
	}
}
