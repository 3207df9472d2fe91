package runtime

import (
	"context"
	"slices"
	"testing"
)

// The terminal checkpoint must cover every record a bounded job produces,
// including what non-source tasks emit at end of input.
func TestTerminalCheckpointCoversEndOfInputOutput(t *testing.T) {
	var committed []int
	g := &JobGraph{
		Vertices: []*Vertex{
			{UID: "src", Parallelism: 1, NewSource: func(int) Source { return &countSource{n: 5} }},
			{UID: "sum", Parallelism: 1, NewOperator: func(int) Operator { return &sumOp{} }},
			{UID: "sink", Parallelism: 1, NewOperator: func(int) Operator { return &txSink{committed: &committed} }},
		},
		Edges: []Edge{{From: 0, To: 1}, {From: 1, To: 2}},
	}
	err := Execute(context.Background(), g, Config{MaxParallelism: 8, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(committed, 1000010) {
		t.Fatalf("committed output %v lacks the end-of-input result 1000010", committed)
	}
}

// The terminal checkpoint's completion is delivered to a sink only while the
// sink is open (it must commit its last transaction).
func TestTerminalCompletionReachesOpenSink(t *testing.T) {
	late, runs := 0, 50
	for i := 0; i < runs; i++ {
		var committed []int
		g := &JobGraph{
			Vertices: []*Vertex{
				{UID: "src", Parallelism: 1, NewSource: func(int) Source { return &countSource{n: 5} }},
				{UID: "sink", Parallelism: 1, NewOperator: func(int) Operator { return &txSink{committed: &committed, lateNotes: &late} }},
			},
			Edges: []Edge{{From: 0, To: 1}},
		}
		if err := Execute(context.Background(), g, Config{MaxParallelism: 8, CheckpointDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	if late > 0 {
		t.Fatalf("%d of %d runs notified the sink of the terminal checkpoint after it was closed", late, runs)
	}
}
