package store

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/internal/fault"
)

// Prepare moves the syncs that a checkpoint's first snapshot write and its
// marker paid for off the checkpoint: the chk directory and the marker's
// synced temp file are made ahead, and WriteCompleted only renames and
// syncs the directory.
func TestPrepareSequence(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	for _, prepared := range []bool{false, true} {
		fs := newRecFS()
		s := openTest(t, fs, Options{})
		fs.take()
		var prepOps []string
		if prepared {
			s.Prepare(1)
			prepOps = fs.take()
		}
		if _, err := s.WriteSnapshot(1, "a-0", []byte("x")); err != nil {
			t.Fatal(err)
		}
		snapOps := fs.take()
		if err := s.WriteCompleted(1); err != nil {
			t.Fatal(err)
		}
		markerOps := fs.take()
		mkdir := []string{"mkdir /ckpt/chk-1", "opendir /ckpt", "sync /ckpt", "close /ckpt"}
		stage := []string{"create /ckpt/.COMPLETED-1.part", "write /ckpt/.COMPLETED-1.part 2", "sync /ckpt/.COMPLETED-1.part", "close /ckpt/.COMPLETED-1.part"}
		publish := []string{"rename /ckpt/.COMPLETED-1.part /ckpt/COMPLETED-1", "opendir /ckpt", "sync /ckpt", "close /ckpt"}
		snap := []string{
			"create /ckpt/chk-1/.a-0.snap.part", "write /ckpt/chk-1/.a-0.snap.part 1", "sync /ckpt/chk-1/.a-0.snap.part",
			"close /ckpt/chk-1/.a-0.snap.part", "rename /ckpt/chk-1/.a-0.snap.part /ckpt/chk-1/a-0.snap",
			"opendir /ckpt/chk-1", "sync /ckpt/chk-1", "close /ckpt/chk-1",
		}
		wantPrep, wantSnap, wantMarker := slices.Concat(mkdir, stage), snap, publish
		if !prepared {
			wantPrep, wantSnap, wantMarker = nil, slices.Concat(mkdir, snap), slices.Concat(stage, publish)
		}
		for _, c := range []struct {
			what      string
			got, want []string
		}{{"Prepare", prepOps, wantPrep}, {"WriteSnapshot", snapOps, wantSnap}, {"WriteCompleted", markerOps, wantMarker}} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("prepared=%v: %s did\n  %s\nwant\n  %s", prepared, c.what, strings.Join(c.got, "\n  "), strings.Join(c.want, "\n  "))
			}
		}
		if got := string(readAll(t, fs, "/ckpt/COMPLETED-1")); got != "1\n" {
			t.Errorf("prepared=%v: COMPLETED-1 holds %q", prepared, got)
		}
		if got := names(t, fs, testDir); !slices.Equal(got, []string{"COMPLETED-1", "chk-1"}) {
			t.Errorf("prepared=%v: directory holds %q", prepared, got)
		}
	}
}

// A staging that fails leaves no temp file and fails WriteCompleted with
// its error, as a marker write that fails there would.
func TestPrepareStagingFailureFailsTheMarker(t *testing.T) {
	t.Setenv(FsyncEnvVar, "1")
	injected := errors.New("injected before the marker's sync")
	fs := newRecFS()
	s := openTest(t, fs, Options{})
	restore := fault.Set(FaultBeforeSync, func() error { return injected })
	s.Prepare(1)
	restore()
	if got := names(t, fs, testDir); !slices.Equal(got, []string{"chk-1"}) {
		t.Fatalf("after a failed staging the directory holds %q", got)
	}
	if _, err := s.WriteSnapshot(1, "a-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	err := s.WriteCompleted(1)
	if !errors.Is(err, injected) || !strings.Contains(err.Error(), "COMPLETED-1") {
		t.Fatalf("WriteCompleted(1) = %v, want the staging's error naming COMPLETED-1", err)
	}
	if exists(t, fs, "/ckpt/COMPLETED-1") {
		t.Fatal("COMPLETED-1 exists although its staging failed")
	}
	// The failure is reported once; a second write starts afresh.
	if err := s.WriteCompleted(1); err != nil {
		t.Fatalf("WriteCompleted(1) again: %v", err)
	}
}

// At most one marker is staged; Discard of its checkpoint removes it,
// retention keeps it, and a temp file that an earlier process staged is
// removed by the next retention like any cut-short marker write.
func TestPrepareStagedMarkerLifecycle(t *testing.T) {
	fs := newRecFS()
	s := openTest(t, fs, Options{Retain: 1})
	s.Prepare(1)
	s.Prepare(2)
	if got := names(t, fs, testDir); !slices.Equal(got, []string{".COMPLETED-2.part", "chk-1", "chk-2"}) {
		t.Fatalf("after preparing 1 and 2 the directory holds %q", got)
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatalf("WriteCompleted(1) after another id was prepared: %v", err)
	}
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if !exists(t, fs, "/ckpt/.COMPLETED-2.part") {
		t.Fatal("retention removed the staged marker")
	}
	if err := s.Discard(2); err != nil {
		t.Fatal(err)
	}
	if got := names(t, fs, testDir); !slices.Equal(got, []string{"COMPLETED-1", "chk-1"}) {
		t.Fatalf("after Discard(2) the directory holds %q", got)
	}
	if s.NextID() != 3 {
		t.Fatalf("NextID() = %d after preparing 2, want 3", s.NextID())
	}

	s.Prepare(3)
	s2 := openTest(t, fs, Options{Retain: 1})
	if s2.NextID() != 4 {
		t.Fatalf("a new Store's NextID() = %d with chk-3 prepared, want 4", s2.NextID())
	}
	if err := s2.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if exists(t, fs, "/ckpt/.COMPLETED-3.part") {
		t.Fatal("a new Store's retention kept a marker an earlier Store staged")
	}
	if err := s.Discard(checkpoint.ID(3)); err != nil {
		t.Fatal(err)
	}
}
