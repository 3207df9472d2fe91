package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clinkstream/clink/connector"
)

// TestXAReconcileAbandonedGeneration covers prepared transactions of a
// generation nobody restores: a rescale 2→4 (generation 1) prepared and
// crashed before any of its checkpoints completed, and the operator
// restores the generation-0 checkpoint at parallelism 2 again.
func TestXAReconcileAbandonedGeneration(t *testing.T) {
	const table, uid = "clink_xa_abandoned", "xa_aband"
	newTable(t, table, "id bigint PRIMARY KEY, name text NOT NULL", uid)
	conn := admin(t)

	open := func(t *testing.T, ictx connector.InitContext[Committable]) *XASink[row] {
		cfg := xaConfig(table)
		cfg.Timeout = 5 * time.Second // a COPY blocked on an orphan's lock fails fast
		s := newXA(t, cfg)
		openDirect(t, s, ictx)
		return s
	}
	check := func(t *testing.T, want []string) {
		t.Helper()
		slices.Sort(want)
		if got := preparedOf(t, conn, uid); !slices.Equal(got, want) {
			t.Errorf("prepared after open:\n got %v\nwant %v", got, want)
		}
	}

	t.Run("restore the older generation at the same parallelism", func(t *testing.T) {
		rollbackPrepared(t, conn, uid)
		mustExec(t, conn, "TRUNCATE "+table)
		for i, gid := range []string{
			"clink_xa_aband_g0_sub0_7", // pending handle of old subtask 0
			"clink_xa_aband_g0_sub1_7", // pending handle of old subtask 1
			"clink_xa_aband_g1_sub0_8", // the abandoned rescale's
			"clink_xa_aband_g1_sub1_8",
			"clink_xa_aband_g1_sub2_8",
			"clink_xa_aband_g1_sub3_8",
			"clink_xa_aband_g2_sub1_9", // a later abandoned generation
		} {
			prepareRaw(t, table, gid, int64(i+1))
		}
		// Subtask 1 takes the odd subtask indexes of abandoned generations.
		s1 := open(t, connector.InitContext[Committable]{
			UID: uid, Subtask: 1, Parallelism: 2, Generation: 0, PreviousGeneration: 0, Succeeds: []int{1},
			Pending: []Committable{{GID: "clink_xa_aband_g0_sub1_7"}},
		})
		check(t, []string{"clink_xa_aband_g0_sub0_7", "clink_xa_aband_g0_sub1_7", "clink_xa_aband_g1_sub0_8", "clink_xa_aband_g1_sub2_8"})
		s0 := open(t, connector.InitContext[Committable]{
			UID: uid, Subtask: 0, Parallelism: 2, Generation: 0, PreviousGeneration: 0, Succeeds: []int{0},
			Pending: []Committable{{GID: "clink_xa_aband_g0_sub0_7"}},
		})
		check(t, []string{"clink_xa_aband_g0_sub0_7", "clink_xa_aband_g0_sub1_7"})
		// The replay writes what g1_sub3_8 had locked; it must not block.
		if err := s1.Write(row{ID: 6, Name: "replayed"}); err != nil {
			t.Fatal(err)
		}
		h, ok, err := s1.PrepareCommit(8)
		if err != nil || !ok {
			t.Fatalf("prepare after reconcile: %v %v", ok, err)
		}
		for _, c := range []Committable{{GID: "clink_xa_aband_g0_sub0_7"}, {GID: "clink_xa_aband_g0_sub1_7"}, h} {
			if err := s0.Commit(c); err != nil {
				t.Fatal(err)
			}
		}
		got := queryStrings(t, conn, "SELECT id || ':' || name FROM "+table+" ORDER BY id")
		if want := []string{"1:clink_xa_aband_g0_sub0_7", "2:clink_xa_aband_g0_sub1_7", "6:replayed"}; !slices.Equal(got, want) {
			t.Errorf("visible rows %v, want %v", got, want)
		}
	})

	t.Run("restore rescaled to a generation an abandoned run used", func(t *testing.T) {
		// 2→4 as generation 1 crashed; the operator restores the
		// generation-0 checkpoint at parallelism 3, generation 1 again.
		rollbackPrepared(t, conn, uid)
		mustExec(t, conn, "TRUNCATE "+table)
		for i, gid := range []string{
			"clink_xa_aband_g1_sub3_8", // abandoned: sub >= parallelism, 3 % 3 = 0
			"clink_xa_aband_g1_sub1_8", // subtask 1's own index in the current generation
			"clink_xa_aband_g0_sub1_8", // old subtask 1: succeeded by new subtask 1
		} {
			prepareRaw(t, table, gid, int64(i+1))
		}
		open(t, connector.InitContext[Committable]{
			UID: uid, Subtask: 0, Parallelism: 3, Generation: 1, PreviousGeneration: 0, Succeeds: []int{0},
		})
		check(t, []string{"clink_xa_aband_g0_sub1_8", "clink_xa_aband_g1_sub1_8"})
	})

	t.Run("fresh start", func(t *testing.T) {
		rollbackPrepared(t, conn, uid)
		mustExec(t, conn, "TRUNCATE "+table)
		for i, gid := range []string{
			"clink_xa_aband_g0_sub0_3",
			"clink_xa_aband_g3_sub0_3", // any generation
			"clink_xa_aband_g3_sub2_3", // 2 % 2 = 0
			"clink_xa_aband_g3_sub1_3", // subtask 1's
			"clink_xa_aband_sub2_1",    // no generation, 2 % 2 = 0
			"clink_xa_aband_sub1_1",
		} {
			prepareRaw(t, table, gid, int64(i+1))
		}
		open(t, connector.InitContext[Committable]{UID: uid, Subtask: 0, Parallelism: 2, PreviousGeneration: -1})
		check(t, []string{"clink_xa_aband_g3_sub1_3", "clink_xa_aband_sub1_1"})
	})
}

// TestXAPrepareOfAbortedTransaction: the server answers PREPARE
// TRANSACTION in an aborted transaction block with ROLLBACK and no error;
// the sink must not hand out a handle for it.
func TestXAPrepareOfAbortedTransaction(t *testing.T) {
	const table, uid = "clink_xa_prep_aborted", "xa_prep_ab"
	newTable(t, table, "id bigint NOT NULL, name text NOT NULL", uid)
	s := newXA(t, xaConfig(table))
	openDirect(t, s, connector.InitContext[Committable]{UID: uid, Parallelism: 1, PreviousGeneration: -1})
	if err := s.Write(row{ID: 1, Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	// Something aborts the interval's transaction without the sink
	// noticing (here a failing statement on its data connection).
	if _, err := s.data.Exec(context.Background(), "SELECT 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	h, ok, err := s.PrepareCommit(1)
	gid := formatGID(uid, 0, 0, 1)
	if err == nil || !strings.Contains(err.Error(), gid) || !strings.Contains(err.Error(), table) {
		t.Fatalf("PrepareCommit of an aborted transaction = %+v, %v, %v; want an error naming %s", h, ok, err, gid)
	}
	if got := preparedOf(t, admin(t), uid); len(got) != 0 {
		t.Errorf("prepared transactions %v", got)
	}
	// The sink carries on with the next interval.
	if err := s.Write(row{ID: 2, Name: "y"}); err != nil {
		t.Fatal(err)
	}
	if h, ok, err = s.PrepareCommit(2); err != nil || !ok {
		t.Fatalf("next prepare: %v %v", ok, err)
	}
	if err := s.Commit(h); err != nil {
		t.Fatal(err)
	}
	if got := queryStrings(t, admin(t), "SELECT name FROM "+pgx.Identifier{table}.Sanitize()); !slices.Equal(got, []string{"y"}) {
		t.Errorf("rows %v", got)
	}
}
