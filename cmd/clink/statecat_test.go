package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// writeCheckpoints makes a checkpoint directory with checkpoint 1 completed
// and checkpoint 2 written but not completed.
func writeCheckpoints(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for id := checkpoint.ID(1); id <= 2; id++ {
		snap := &store.TaskSnapshot{
			Checkpoint:     id,
			Task:           store.SnapshotName("map", 0),
			Subtask:        0,
			Parallelism:    1,
			MaxParallelism: 128,
			Operators: []store.OperatorSnapshot{{
				UID:        "map",
				OffsetText: fmt.Sprintf("offset-%d", id),
				Watermark:  store.NoWatermark,
			}},
		}
		if _, err := s.WriteSnapshot(id, snap.Task, snap.Marshal()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestStateCatLists(t *testing.T) {
	dir := writeCheckpoints(t)
	code, out, errs := clink(t, "state-cat", dir)
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"chk-1/", "chk-2/", store.SnapshotName("map", 0)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStateCatOneCheckpoint(t *testing.T) {
	dir := writeCheckpoints(t)
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", "2")
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat --checkpoint 2: exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "offset-2") || strings.Contains(out, "offset-1") {
		t.Errorf("output does not show exactly checkpoint 2's snapshot:\n%s", out)
	}
}

func TestStateCatErrors(t *testing.T) {
	dir := writeCheckpoints(t)
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dir", []string{"state-cat"}, "clink state-cat: accepts 1 arg(s), received 0"},
		{"missing dir", []string{"state-cat", missing}, missing},
		{"checkpoint zero", []string{"state-cat", dir, "--checkpoint", "0"}, "--checkpoint must be at least 1"},
		{"not a number", []string{"state-cat", dir, "--checkpoint", "latest"}, `invalid argument "latest" for "--checkpoint"`},
		{"unknown checkpoint", []string{"state-cat", dir, "--checkpoint", "9"}, "9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := clink(t, tc.args...)
			if code == 0 {
				t.Fatal("exit 0, want non-zero")
			}
			if !strings.HasPrefix(errs, "clink state-cat: ") || !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q, want a clink state-cat error containing %q", errs, tc.want)
			}
		})
	}
}
