package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connector/connectortest"
)

// row is the record type of the XA tests.
type row struct {
	ID   int64
	Name string
}

func rowValues(r row) []any { return []any{r.ID, r.Name} }

func xaConfig(table string) XAConfig[row] {
	return XAConfig[row]{
		URL: testURL(), Table: table, Columns: []string{"id", "name"},
		Values: rowValues, BatchRows: 64, Timeout: 30 * time.Second,
	}
}

func newXA(t testing.TB, cfg XAConfig[row]) *XASink[row] {
	t.Helper()
	s, err := NewXASink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// xaTarget is the conformance target for table with sink uid.
func xaTarget(t testing.TB, table, uid string) connectortest.Target[row, Committable] {
	newTable(t, table, "id bigint NOT NULL, name text NOT NULL", uid)
	conn := admin(t)
	return connectortest.Target[row, Committable]{
		UID: uid,
		New: func() connector.CommittingSink[row, Committable] { return newXA(t, xaConfig(table)) },
		Record: func(i int) row {
			return row{ID: int64(i), Name: fmt.Sprintf("r%d", i)}
		},
		Key: func(i int) string { return fmt.Sprintf("%d:r%d", i, i) },
		Visible: func(t testing.TB) []string {
			return queryStrings(t, conn, "SELECT id::text || ':' || name FROM "+pgx.Identifier{table}.Sanitize())
		},
		Reset: func(t testing.TB) {
			rollbackPrepared(t, conn, uid)
			mustExec(t, conn, "TRUNCATE "+pgx.Identifier{table}.Sanitize())
		},
	}
}

func TestXAConformance(t *testing.T) {
	connectortest.Run(t, xaTarget(t, "clink_xa_conformance", "xa_conformance"))
	if left := preparedOf(t, admin(t), "xa_conformance"); len(left) > 0 {
		t.Logf("prepared transactions left by the suite's crash cases (rolled back at cleanup): %v", left)
	}
}

func FuzzXACommittableCodec(f *testing.F) {
	tg := connectortest.Target[row, Committable]{
		New: func() connector.CommittingSink[row, Committable] { return &XASink[row]{} },
	}
	connectortest.FuzzCodec(f, tg, Committable{GID: "clink_sink_g0_sub1_42"})
}

func TestGIDFormat(t *testing.T) {
	for _, tc := range []struct {
		uid, gid string
		want     gidParts
		ok       bool
	}{
		{"sink", "clink_sink_g0_sub1_42", gidParts{hasGen: true, gen: 0, sub: 1, ckpt: 42}, true},
		{"sink", "clink_sink_g12_sub0_7", gidParts{hasGen: true, gen: 12, sub: 0, ckpt: 7}, true},
		{"sink", "clink_sink_sub3_9", gidParts{sub: 3, ckpt: 9}, true},
		{"my_sink", "clink_my_sink_g1_sub3_9", gidParts{hasGen: true, gen: 1, sub: 3, ckpt: 9}, true},
		{"sink", "clink_sink_x_g0_sub0_1", gidParts{}, false}, // uid sink_x
		{"sink", "clink_sinker_g0_sub0_1", gidParts{}, false}, // uid sinker
		{"sink", "clink_sink_g0_sub0_01", gidParts{}, false},  // not the form formatGID writes
		{"sink", "clink_sink_g0_sub0_1_2", gidParts{}, false}, // trailing part
		{"sink", "clink_sink_g_sub0_1", gidParts{}, false},    // no generation number
		{"sink", "clink_sink_g0_sub-1_1", gidParts{}, false},  // sign
		{"sink", "other_sink_g0_sub0_1", gidParts{}, false},   // not clink's
		{"sink", "clink_sink_g0_sub0_", gidParts{}, false},    // no checkpoint
		{"sink", "clink_sink_g0_sub00_1", gidParts{}, false},  // leading zero
		{"sink", "clink_sink_g0_subx_1", gidParts{}, false},   // not a number
		{"sink", "clink_sink_gx_sub0_1", gidParts{}, false},   // not a number
		{"sink", "clink_sink_", gidParts{}, false},            // nothing after the prefix
		{"a'b", "clink_a'b_g0_sub0_1", gidParts{hasGen: true, sub: 0, ckpt: 1}, true},
	} {
		got, ok := parseGID(tc.uid, tc.gid)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseGID(%q, %q) = %+v, %v; want %+v, %v", tc.uid, tc.gid, got, ok, tc.want, tc.ok)
		}
		if ok && got.hasGen {
			if back := formatGID(tc.uid, got.gen, got.sub, got.ckpt); back != tc.gid {
				t.Errorf("formatGID of %q gives %q", tc.gid, back)
			}
		}
	}
	if g := formatGID("u", 3, 1, 17); g != "clink_u_g3_sub1_17" {
		t.Errorf("formatGID = %q", g)
	}
}

func TestQuoteLiteral(t *testing.T) {
	conn := admin(t)
	for _, s := range []string{"plain", "it's", `back\slash`, `both\'`, "uni-ç"} {
		var got string
		if err := conn.QueryRow(testCtx(t), "SELECT "+quoteLiteral(s)).Scan(&got); err != nil {
			t.Fatalf("%q quoted as %s: %v", s, quoteLiteral(s), err)
		}
		if got != s {
			t.Errorf("%q quoted as %s reads back as %q", s, quoteLiteral(s), got)
		}
	}
}

func TestResponsibility(t *testing.T) {
	g := func(gen, sub int) gidParts { return gidParts{hasGen: true, gen: gen, sub: sub, ckpt: 1} }
	legacy := func(sub int) gidParts { return gidParts{sub: sub, ckpt: 1} }
	fresh := responsibility{gen: 0, prevGen: -1, sub: 1, parallelism: 2}
	same := responsibility{gen: 2, prevGen: 2, sub: 1, parallelism: 2, succeeds: []int{1}}
	down := responsibility{gen: 3, prevGen: 2, sub: 0, parallelism: 2, succeeds: []int{0, 1}}
	upSecond := responsibility{gen: 3, prevGen: 2, sub: 3, parallelism: 4} // a scale-up child that succeeds nobody
	// Generation 1 (a rescale 2→4) was abandoned; generation 0 restored at 2.
	back := responsibility{gen: 0, prevGen: 0, sub: 1, parallelism: 2, succeeds: []int{1}}
	// Generation 1 at 4 was abandoned; generation 0 restored at 3 becomes generation 1 again.
	again := responsibility{gen: 1, prevGen: 0, sub: 0, parallelism: 3, succeeds: []int{0}}
	for _, tc := range []struct {
		name string
		r    responsibility
		p    gidParts
		want bool
	}{
		{"fresh own", fresh, g(0, 1), true},
		{"fresh other", fresh, g(0, 0), false},
		{"fresh legacy own", fresh, legacy(1), true},
		{"fresh legacy other", fresh, legacy(0), false},
		{"same own", same, g(2, 1), true},
		{"same other", same, g(2, 0), false},
		{"same older generation", same, g(1, 1), false},
		{"same legacy own", same, legacy(1), true},
		{"down parent 0", down, g(2, 0), true},
		{"down parent 1", down, g(2, 1), true},
		{"down not a parent", down, g(2, 2), false},
		{"down own new", down, g(3, 0), true},
		{"down new sibling", down, g(3, 1), false},
		{"down legacy parent", down, legacy(1), true},
		{"up child own", upSecond, g(3, 3), true},
		{"up child old same index", upSecond, g(2, 3), false},
		{"up child legacy", upSecond, legacy(3), false},
		{"up child abandoned later generation", upSecond, g(4, 7), true},
		{"up child abandoned later generation, other", upSecond, g(4, 6), false},
		{"fresh any generation", fresh, g(5, 1), true},
		{"fresh any generation, dealt", fresh, g(5, 3), true},
		{"fresh any generation, other", fresh, g(5, 2), false},
		{"fresh legacy dealt", fresh, legacy(3), true},
		{"back abandoned own index", back, g(1, 1), true},
		{"back abandoned dealt", back, g(1, 3), true},
		{"back abandoned other", back, g(1, 0), false},
		{"back abandoned other dealt", back, g(1, 2), false},
		{"back abandoned later", back, g(2, 5), true},
		{"back current beyond parallelism", back, g(0, 3), true},
		{"back current sibling", back, g(0, 0), false},
		{"again abandoned beyond parallelism", again, g(1, 3), true},
		{"again beyond parallelism, other", again, g(1, 4), false},
		{"again sibling", again, g(1, 1), false},
		{"again old sibling", again, g(0, 1), false},
		{"again later", again, g(2, 3), true},
	} {
		if got := tc.r.owns(tc.p); got != tc.want {
			t.Errorf("%s: owns(%+v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

// prepareRaw prepares, outside any sink, a transaction that inserts id
// into table under gid.
func prepareRaw(t testing.TB, table, gid string, id int64) {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	mustExec(t, conn, "BEGIN")
	mustExec(t, conn, "INSERT INTO "+pgx.Identifier{table}.Sanitize()+" (id, name) VALUES ($1, $2)", id, gid)
	mustExec(t, conn, "PREPARE TRANSACTION "+quoteLiteral(gid))
}

func openDirect(t testing.TB, s *XASink[row], ctx connector.InitContext[Committable]) {
	t.Helper()
	if ctx.Logger == nil {
		ctx.Logger = slog.New(slog.DiscardHandler)
	}
	if err := s.Open(ctx); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
}

func TestXAReconcileAtOpen(t *testing.T) {
	const table, uid = "clink_xa_reconcile", "xa_rec"
	newTable(t, table, "id bigint NOT NULL, name text NOT NULL", uid)
	for _, other := range []string{"xa_rec_x", "xa_re"} {
		t.Cleanup(func() { rollbackPrepared(t, admin(t), other) })
	}
	conn := admin(t)

	t.Run("restore at the same parallelism", func(t *testing.T) {
		rollbackPrepared(t, conn, uid)
		gids := map[string]bool{ // gid -> kept after subtask 1 opens
			"clink_xa_rec_g2_sub1_4": true,  // pending: the restored checkpoint's handle
			"clink_xa_rec_g2_sub1_5": false, // orphan of its own index
			"clink_xa_rec_g2_sub1_6": false, // orphan of its own index
			"clink_xa_rec_sub1_3":    false, // a gid without generation, own index
			"clink_xa_rec_g2_sub0_5": true,  // another subtask's
			"clink_xa_rec_g1_sub1_2": true,  // an older generation: its succeeding subtask's, at that rescale
			"clink_xa_rec_sub0_3":    true,  // another subtask's, without generation
		}
		others := []string{"clink_xa_rec_x_g2_sub1_5", "clink_xa_re_g2_sub1_5"} // other uids that share a prefix
		id := int64(0)
		for gid := range gids {
			prepareRaw(t, table, gid, id)
			id++
		}
		for _, gid := range others {
			prepareRaw(t, table, gid, id)
			id++
		}
		s := newXA(t, xaConfig(table))
		openDirect(t, s, connector.InitContext[Committable]{
			UID: uid, Subtask: 1, Parallelism: 2, Generation: 2, PreviousGeneration: 2, Succeeds: []int{1},
			Pending: []Committable{{GID: "clink_xa_rec_g2_sub1_4"}},
		})
		var want []string
		for gid, kept := range gids {
			if kept {
				want = append(want, gid)
			}
		}
		slices.Sort(want)
		if got := preparedOf(t, conn, uid); !slices.Equal(got, want) {
			t.Errorf("prepared after open:\n got %v\nwant %v", got, want)
		}
		for _, other := range []string{"xa_rec_x", "xa_re"} {
			if got := preparedOf(t, conn, other); len(got) != 1 {
				t.Errorf("uid %s: prepared transactions %v, want its one untouched", other, got)
			}
		}
		// The kept handle commits; nothing rolled back became visible.
		if err := s.Commit(Committable{GID: "clink_xa_rec_g2_sub1_4"}); err != nil {
			t.Fatal(err)
		}
		got := queryStrings(t, conn, "SELECT name FROM "+table)
		if !slices.Equal(got, []string{"clink_xa_rec_g2_sub1_4"}) {
			t.Errorf("visible rows %v, want only the pending handle's", got)
		}
		for _, other := range []string{"xa_rec_x", "xa_re"} {
			rollbackPrepared(t, conn, other) // they lock the table
		}
	})

	t.Run("rescale 3 to 2", func(t *testing.T) {
		rollbackPrepared(t, conn, uid)
		mustExec(t, conn, "TRUNCATE "+table)
		gids := map[string]bool{ // gid -> kept after new subtask 0 opens
			"clink_xa_rec_g0_sub0_7": true,  // pending, inherited from old subtask 0
			"clink_xa_rec_g0_sub1_7": true,  // pending, inherited from old subtask 1
			"clink_xa_rec_g0_sub0_8": false, // orphans of the subtasks it succeeds
			"clink_xa_rec_g0_sub1_8": false,
			"clink_xa_rec_g0_sub2_8": true,  // old subtask 2: new subtask 1 succeeds it
			"clink_xa_rec_g1_sub0_8": false, // its own index in the new generation
			"clink_xa_rec_g1_sub1_8": true,  // new subtask 1's
			"clink_xa_rec_sub1_2":    false, // no generation, a subtask it succeeds
			"clink_xa_rec_sub2_2":    true,
		}
		id := int64(100)
		for gid := range gids {
			prepareRaw(t, table, gid, id)
			id++
		}
		s := newXA(t, xaConfig(table))
		openDirect(t, s, connector.InitContext[Committable]{
			UID: uid, Subtask: 0, Parallelism: 2, Generation: 1, PreviousGeneration: 0, Succeeds: []int{0, 1},
			Pending: []Committable{{GID: "clink_xa_rec_g0_sub0_7"}, {GID: "clink_xa_rec_g0_sub1_7"}},
		})
		var want []string
		for gid, kept := range gids {
			if kept {
				want = append(want, gid)
			}
		}
		slices.Sort(want)
		if got := preparedOf(t, conn, uid); !slices.Equal(got, want) {
			t.Errorf("prepared after open:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("the new run prepares again under a rolled back gid", func(t *testing.T) {
		rollbackPrepared(t, conn, uid)
		mustExec(t, conn, "TRUNCATE "+table)
		// The process died after preparing checkpoint 9, whose snapshot
		// never became durable; the restored run numbers its next
		// checkpoint 9 again.
		prepareRaw(t, table, "clink_xa_rec_g0_sub0_9", 1)
		s := newXA(t, xaConfig(table))
		openDirect(t, s, connector.InitContext[Committable]{UID: uid, Parallelism: 1, Succeeds: []int{0}})
		if err := s.Write(row{ID: 2, Name: "new"}); err != nil {
			t.Fatal(err)
		}
		h, ok, err := s.PrepareCommit(9)
		if err != nil || !ok {
			t.Fatalf("prepare: %v %v", ok, err)
		}
		if err := s.Commit(h); err != nil {
			t.Fatal(err)
		}
		if got := queryStrings(t, conn, "SELECT name FROM "+table); !slices.Equal(got, []string{"new"}) {
			t.Errorf("visible rows %v, want only the new run's", got)
		}
	})
}

// TestXACommitDuringWrites commits and aborts prepared transactions on
// another goroutine while the task goroutine writes and prepares, as the
// dispatch goroutine does; run it with -race.
func TestXACommitDuringWrites(t *testing.T) {
	const table, uid = "clink_xa_concurrent", "xa_conc"
	newTable(t, table, "id bigint NOT NULL, name text NOT NULL", uid)
	s := newXA(t, xaConfig(table))
	openDirect(t, s, connector.InitContext[Committable]{UID: uid, Parallelism: 1, PreviousGeneration: -1})
	type job struct {
		h      Committable
		commit bool
	}
	jobs := make(chan job, 4)
	var wg sync.WaitGroup
	var commitErr error
	wg.Go(func() {
		for j := range jobs {
			var err error
			if j.commit {
				err = s.Commit(j.h)
			} else {
				err = s.Abort(j.h)
			}
			if err == nil && j.commit {
				err = s.Commit(j.h) // idempotent
			}
			if err != nil && commitErr == nil {
				commitErr = err
			}
		}
	})
	const intervals, per = 60, 500
	want := 0
	for k := range intervals {
		for i := range per {
			id := int64(k*per + i)
			if err := s.Write(row{ID: id, Name: strconv.FormatInt(id, 10)}); err != nil {
				t.Fatal(err)
			}
		}
		h, ok, err := s.PrepareCommit(checkpoint.ID(k + 1))
		if err != nil || !ok {
			t.Fatalf("prepare %d: %v %v", k+1, ok, err)
		}
		commit := k%5 != 3
		if commit {
			want += per
		}
		jobs <- job{h, commit}
	}
	close(jobs)
	wg.Wait()
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	conn := admin(t)
	var n, distinct int
	if err := conn.QueryRow(testCtx(t), "SELECT count(*), count(DISTINCT id) FROM "+table).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != want || distinct != want {
		t.Errorf("table holds %d rows (%d distinct), want %d", n, distinct, want)
	}
	if left := preparedOf(t, conn, uid); len(left) > 0 {
		t.Errorf("prepared transactions left: %v", left)
	}
}

func TestPreparedDisabledMessage(t *testing.T) {
	for _, err := range []error{
		checkPreparedSetting("public.orders", "0"),
		prepareError("public.orders", "clink_s_g0_sub0_1", &pgconn.PgError{
			Code: codeNotInPrereqState, Message: "prepared transactions are disabled",
			Hint: "Set max_prepared_transactions to a nonzero value.",
		}),
	} {
		if err == nil {
			t.Fatal("no error for a server without prepared transactions")
		}
		for _, want := range []string{"public.orders", "max_prepared_transactions", "ALTER SYSTEM SET max_prepared_transactions", "restart"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
	if err := checkPreparedSetting("t", "64"); err != nil {
		t.Errorf("64 refused: %v", err)
	}
	other := prepareError("t", "g", errors.New("connection reset"))
	if strings.Contains(other.Error(), "max_prepared_transactions") || !strings.Contains(other.Error(), "connection reset") {
		t.Errorf("an unrelated failure is explained as %q", other)
	}
}

// TestPreparedDisabledServer runs only against a server with prepared
// transactions disabled (CI enables them; see .ci/run).
func TestPreparedDisabledServer(t *testing.T) {
	var setting string
	if err := admin(t).QueryRow(testCtx(t), "SHOW max_prepared_transactions").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	if setting != "0" {
		t.Skipf("the server allows %s prepared transactions; TestPreparedDisabledMessage covers the message", setting)
	}
	s := newXA(t, xaConfig("clink_xa_disabled"))
	err := s.Open(connector.InitContext[Committable]{UID: "xa_disabled", Parallelism: 1, PreviousGeneration: -1})
	if err == nil || !strings.Contains(err.Error(), "max_prepared_transactions") {
		t.Fatalf("open against a server without prepared transactions: %v", err)
	}
}

func TestXAConfigErrors(t *testing.T) {
	good := xaConfig("t")
	for _, tc := range []struct {
		name string
		edit func(c *XAConfig[row])
		want string
	}{
		{"no url", func(c *XAConfig[row]) { c.URL = "" }, "connection URL"},
		{"no table", func(c *XAConfig[row]) { c.Table = "" }, "no table"},
		{"bad table", func(c *XAConfig[row]) { c.Table = "a.b.c" }, `"a.b.c"`},
		{"no columns", func(c *XAConfig[row]) { c.Columns = nil }, "no columns"},
		{"twice", func(c *XAConfig[row]) { c.Columns = []string{"a", "a"} }, `"a" given twice`},
		{"no values", func(c *XAConfig[row]) { c.Values = nil }, "Values"},
		{"bad url", func(c *XAConfig[row]) { c.URL = "postgres://[::1" }, "connection URL"},
	} {
		c := good
		tc.edit(&c)
		if _, err := NewXASink(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	s := newXA(t, good)
	long := strings.Repeat("u", 180)
	if err := s.Open(connector.InitContext[Committable]{UID: long, Parallelism: 1}); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a %d-byte uid: %v", len(long), err)
	}
}

func TestXAErrorsNameTheTable(t *testing.T) {
	const uid = "xa_err"
	s := newXA(t, xaConfig("clink_xa_no_such_table"))
	openDirect(t, s, connector.InitContext[Committable]{UID: uid, Parallelism: 1, PreviousGeneration: -1})
	if err := s.Write(row{ID: 1, Name: "x"}); err != nil {
		t.Fatal(err) // buffered
	}
	_, _, err := s.PrepareCommit(1)
	if err == nil || !strings.Contains(err.Error(), "clink_xa_no_such_table") {
		t.Errorf("prepare into a missing table: %v", err)
	}
	bad := xaConfig("clink_xa_no_such_table")
	bad.Values = func(row) []any { return []any{1} }
	s2 := newXA(t, bad)
	if err := s2.Write(row{}); err == nil || !strings.Contains(err.Error(), "1 values for 2 columns") {
		t.Errorf("short row: %v", err)
	}
}
