package runtime

import (
	"strings"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// layoutTask is one task of a checkpoint written for the restore layout
// tests: its vertex, parallelism and the operators of its chain, each with
// a state that names it and the subtask.
type layoutTask struct {
	vertex   string
	p        int
	ops      []string
	inFlight string // an operator of ops whose snapshot holds in-flight records
}

const layoutMaxParallelism = 16

func writeLayout(t *testing.T, tasks ...layoutTask) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range tasks {
		for s := range lt.p {
			snap := &store.TaskSnapshot{Checkpoint: 7, Task: store.SnapshotName(lt.vertex, s), Subtask: s, Parallelism: lt.p, MaxParallelism: layoutMaxParallelism}
			for _, uid := range lt.ops {
				op := store.OperatorSnapshot{UID: uid, Watermark: store.NoWatermark,
					OperatorState: []store.NamedState{{Name: "who", Data: []byte(store.SnapshotName(uid, s))}}}
				if uid == lt.inFlight {
					op.InFlight = []store.InFlight{{Input: 0, Records: 1, Data: []byte{1, 0}}}
				}
				snap.Operators = append(snap.Operators, op)
			}
			if _, err := st.WriteTaskSnapshot(snap); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// who describes what a vertex restores from: its task snapshots, then
// each operator's states by old subtask, as "uid=<whose state>,...".
func who(vx *Vertex, r *vertexRestore) string {
	if r == nil {
		return "<nil>"
	}
	var tasks []string
	for _, snap := range r.tasks {
		tasks = append(tasks, snap.Task)
	}
	out := []string{"tasks=" + strings.Join(tasks, ",")}
	ops := vx.Operators
	if len(ops) == 0 {
		ops = []string{vx.UID}
	}
	for _, uid := range ops {
		list, ok := r.ops[uid]
		if !ok {
			continue
		}
		var whose []string
		for _, op := range list {
			whose = append(whose, string(op.OperatorState[0].Data))
		}
		out = append(out, uid+"="+strings.Join(whose, ","))
	}
	return strings.Join(out, " ")
}

func TestRestoreLayout(t *testing.T) {
	for _, c := range []struct {
		name  string
		tasks []layoutTask
		vx    Vertex
		want  string // what vx restores from, by who
		err   string // a substring of the error instead
	}{{
		name:  "same chain",
		tasks: []layoutTask{{vertex: "src", p: 2, ops: []string{"src", "calc"}}, {vertex: "agg", p: 2, ops: []string{"agg"}}},
		vx:    Vertex{UID: "agg", Parallelism: 2, Operators: []string{"agg"}},
		want:  "tasks=agg-0,agg-1 agg=agg-0,agg-1",
	}, {
		name:  "a keyed exchange chained now",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src", "calc"}}, {vertex: "agg", p: 1, ops: []string{"agg", "sink"}}},
		vx:    Vertex{UID: "src", Parallelism: 1, Operators: []string{"src", "calc", "agg", "sink"}},
		want:  "tasks=src-0 src=src-0 calc=calc-0 agg=agg-0 sink=sink-0",
	}, {
		name:  "from 2 into one chain at 1",
		tasks: []layoutTask{{vertex: "src", p: 2, ops: []string{"src"}}, {vertex: "agg", p: 2, ops: []string{"agg"}}},
		vx:    Vertex{UID: "src", Parallelism: 1, Operators: []string{"src", "agg"}},
		want:  "tasks=src-0,src-1 src=src-0,src-1 agg=agg-0,agg-1",
	}, {
		name:  "one chain from two parallelisms",
		tasks: []layoutTask{{vertex: "src", p: 2, ops: []string{"src"}}, {vertex: "agg", p: 4, ops: []string{"agg"}}},
		vx:    Vertex{UID: "src", Parallelism: 1, Operators: []string{"src", "agg"}},
		want:  "tasks=src-0,src-1 src=src-0,src-1 agg=agg-0,agg-1,agg-2,agg-3",
	}, {
		name:  "out of a chain at 1 into its own vertex at 2",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src", "agg", "sink"}}},
		vx:    Vertex{UID: "agg", Parallelism: 2, Operators: []string{"agg", "sink"}},
		want:  "tasks=agg-0 agg=agg-0 sink=sink-0",
	}, {
		name:  "the head keeps its vertex, the rest left it",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src", "agg"}}},
		vx:    Vertex{UID: "src", Parallelism: 2, Operators: []string{"src"}},
		want:  "tasks=src-0 src=src-0",
	}, {
		name:  "an operator new to the job",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}}},
		vx:    Vertex{UID: "src", Parallelism: 1, Operators: []string{"src", "filter", "agg"}},
		want:  "tasks=src-0 src=src-0 agg=agg-0",
	}, {
		name:  "a new head before operators with state",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}}},
		vx:    Vertex{UID: "new", Parallelism: 1, Operators: []string{"new", "agg"}},
		want:  "tasks= agg=agg-0",
	}, {
		name:  "a vertex without operators listed",
		tasks: []layoutTask{{vertex: "v", p: 1, ops: []string{"x"}}},
		vx:    Vertex{UID: "v", Parallelism: 1},
		want:  "tasks=v-0",
	}, {
		name:  "no state of the vertex",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}},
		vx:    Vertex{UID: "other", Parallelism: 1, Operators: []string{"other"}},
		err:   "holds no state of operator other",
	}, {
		name:  "in-flight records and a rescale",
		tasks: []layoutTask{{vertex: "agg", p: 2, ops: []string{"agg"}, inFlight: "agg"}},
		vx:    Vertex{UID: "agg", Parallelism: 1, Operators: []string{"agg"}},
		err:   "cannot be redistributed from parallelism 2 to 1",
	}} {
		t.Run(c.name, func(t *testing.T) {
			st := writeLayout(t, c.tasks...)
			l, err := readLayout(st, 7, layoutMaxParallelism)
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.vertex(&c.vx)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("vertex = %s, %v; want an error with %q", who(&c.vx, r), err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := who(&c.vx, r); got != c.want {
				t.Errorf("vertex restores from\n  %s\nwant\n  %s", got, c.want)
			}
			for s, snap := range r.tasks {
				if snap.Subtask != s || snap.Parallelism != len(r.tasks) || snap.Checkpoint != 7 || snap.MaxParallelism != layoutMaxParallelism {
					t.Errorf("snapshot %s: subtask %d parallelism %d checkpoint %d max parallelism %d", snap.Task, snap.Subtask, snap.Parallelism, snap.Checkpoint, snap.MaxParallelism)
				}
				if len(snap.Operators) == 0 || c.vx.Operators != nil && snap.Operators[0].UID != c.vx.Operators[0] {
					t.Errorf("snapshot %s does not start with the head's state", snap.Task)
				}
			}
		})
	}
}

// TestRestoreLayoutInFlight: in-flight records restore only into the
// tasks they were taken in; a job whose chains differ refuses them (its
// tasks number their input channels otherwise), and restores a checkpoint
// without them.
func TestRestoreLayoutInFlight(t *testing.T) {
	chained := &JobGraph{Vertices: []*Vertex{{UID: "src", Operators: []string{"src", "agg"}}, {UID: "join", Operators: []string{"join"}}, {UID: "b", Operators: []string{"b"}}}}
	unchained := &JobGraph{Vertices: []*Vertex{{UID: "src", Operators: []string{"src"}}, {UID: "agg", Operators: []string{"agg"}}, {UID: "join", Operators: []string{"join"}}, {UID: "b", Operators: []string{"b"}}}}
	for _, c := range []struct {
		name  string
		tasks []layoutTask
		g     *JobGraph
		err   string
	}{{
		name:  "the same tasks",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}, inFlight: "agg"}, {vertex: "join", p: 1, ops: []string{"join"}, inFlight: "join"}, {vertex: "b", p: 1, ops: []string{"b"}}},
		g:     unchained,
	}, {
		name:  "an operator chained now",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}, inFlight: "agg"}, {vertex: "join", p: 1, ops: []string{"join"}}, {vertex: "b", p: 1, ops: []string{"b"}}},
		g:     chained,
		err:   "task agg-0 holds in-flight records of an unaligned checkpoint, but the job's tasks are not the checkpointed job's (task src held operators src and holds agg, src now)",
	}, {
		name: "a head whose upstream tasks changed",
		// join's channels are numbered by the tasks upstream: with agg
		// chained to src they are numbered otherwise.
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}}, {vertex: "join", p: 1, ops: []string{"join"}, inFlight: "join"}, {vertex: "b", p: 1, ops: []string{"b"}}},
		g:     chained,
		err:   "task join-0 holds in-flight records",
	}, {
		name:  "an operator chained no more",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src", "agg"}}, {vertex: "join", p: 1, ops: []string{"join"}, inFlight: "join"}, {vertex: "b", p: 1, ops: []string{"b"}}},
		g:     unchained,
		err:   "task src held operators agg, src and holds src now",
	}, {
		name:  "other chains, nothing in flight",
		tasks: []layoutTask{{vertex: "src", p: 1, ops: []string{"src"}}, {vertex: "agg", p: 1, ops: []string{"agg"}}, {vertex: "join", p: 1, ops: []string{"join"}}, {vertex: "b", p: 1, ops: []string{"b"}}},
		g:     chained,
	}} {
		t.Run(c.name, func(t *testing.T) {
			l, err := readLayout(writeLayout(t, c.tasks...), 7, layoutMaxParallelism)
			if err != nil {
				t.Fatal(err)
			}
			err = l.checkInFlight(c.g)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("checkInFlight = %v, want %q", err, c.err)
			}
		})
	}
}

func TestRestoreLayoutRefusesBrokenCheckpoints(t *testing.T) {
	t.Run("a subtask missing", func(t *testing.T) {
		st := writeLayout(t, layoutTask{vertex: "src", p: 1, ops: []string{"src"}})
		snap := &store.TaskSnapshot{Checkpoint: 7, Task: "agg-1", Subtask: 1, Parallelism: 3, MaxParallelism: layoutMaxParallelism,
			Operators: []store.OperatorSnapshot{{UID: "agg", Watermark: store.NoWatermark}}}
		if _, err := st.WriteTaskSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		_, err := readLayout(st, 7, layoutMaxParallelism)
		if err == nil || !strings.Contains(err.Error(), "the snapshot of task agg-0 is missing") {
			t.Fatalf("readLayout = %v, want the missing subtask named", err)
		}
	})
	t.Run("two parallelisms of one vertex", func(t *testing.T) {
		st := writeLayout(t, layoutTask{vertex: "agg", p: 2, ops: []string{"agg"}})
		snap := &store.TaskSnapshot{Checkpoint: 7, Task: "agg-2", Subtask: 2, Parallelism: 3, MaxParallelism: layoutMaxParallelism,
			Operators: []store.OperatorSnapshot{{UID: "agg", Watermark: store.NoWatermark}}}
		if _, err := st.WriteTaskSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		_, err := readLayout(st, 7, layoutMaxParallelism)
		if err == nil || !strings.Contains(err.Error(), "snapshot agg-2 says parallelism 3, but other snapshots of agg say 2") {
			t.Fatalf("readLayout = %v, want the parallelisms named", err)
		}
	})
	t.Run("one operator in two vertices", func(t *testing.T) {
		st := writeLayout(t, layoutTask{vertex: "a", p: 1, ops: []string{"a", "x"}}, layoutTask{vertex: "b", p: 1, ops: []string{"b", "x"}})
		_, err := readLayout(st, 7, layoutMaxParallelism)
		if err == nil || !strings.Contains(err.Error(), "the state of operator x is in the snapshots of both") {
			t.Fatalf("readLayout = %v, want the operator named", err)
		}
	})
	t.Run("another max parallelism", func(t *testing.T) {
		st := writeLayout(t, layoutTask{vertex: "a", p: 1, ops: []string{"a"}})
		_, err := readLayout(st, 7, 2*layoutMaxParallelism)
		if err == nil || !strings.Contains(err.Error(), "cannot change") {
			t.Fatalf("readLayout = %v, want the max parallelism refused", err)
		}
	})
	t.Run("a snapshot not named for a task", func(t *testing.T) {
		st := writeLayout(t, layoutTask{vertex: "a", p: 1, ops: []string{"a"}})
		if _, err := st.WriteSnapshot(checkpoint.ID(7), "junk", []byte("x")); err != nil {
			t.Fatal(err)
		}
		_, err := readLayout(st, 7, layoutMaxParallelism)
		if err == nil || !strings.Contains(err.Error(), "is not named <operator-uid>-<subtask>") {
			t.Fatalf("readLayout = %v, want the file named", err)
		}
	})
}
