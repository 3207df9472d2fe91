package filesystem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// TestRerunAddsBesideEarlierOutput: two runs of one bounded job into one
// directory, each from a fresh start, both end with a checkpoint of the
// same id (the terminal checkpoint, or the end-of-input commit without
// checkpoints). A staged name built from the checkpoint id alone would let
// the second run publish over the first; with the run token in the name
// the second run's files land beside the first's.
func TestRerunAddsBesideEarlierOutput(t *testing.T) {
	for _, withCheckpoints := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoints=%v", withCheckpoints), func(t *testing.T) {
			out := t.TempDir()
			const n = 1000
			for run := 0; run < 2; run++ {
				opts := clink.Options{Parallelism: 2}
				if withCheckpoints {
					opts.CheckpointDir, opts.CheckpointInterval = t.TempDir(), time.Hour
				}
				env, err := clink.NewEnvironment(opts)
				if err != nil {
					t.Fatal(err)
				}
				src := clink.FromGenerator(env, "gen", clink.GeneratorOptions{Count: n}, func(i int64) row { return rowOf(int(i)) })
				newSink, err := filesystem.NewSink[row](out, filesystem.CSV, filesystem.SinkOptions{})
				if err != nil {
					t.Fatal(err)
				}
				clink.CommitTo(src, "out", newSink)
				if err := env.Execute(context.Background()); err != nil {
					t.Fatalf("run %d: %v", run+1, err)
				}
			}
			got := readCommitted[row](t, out, filesystem.CSV)
			seen := map[int64]int{}
			for _, r := range got {
				seen[r.ID]++
			}
			if len(got) != 2*n || len(seen) != n {
				t.Fatalf("two runs published %d records of %d ids, want %d records of %d ids", len(got), len(seen), 2*n, n)
			}
			for id, k := range seen {
				if k != 2 {
					t.Fatalf("id %d published %d times over two runs, want 2", id, k)
				}
			}
		})
	}
}
