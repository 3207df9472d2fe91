package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
)

// A restore gives each operator the state it checkpointed, found by the
// operator's uid in whichever task snapshot of the checkpoint holds it,
// not by the task: the chains of a job need not be those of the job that
// took the checkpoint. A keyed exchange between two vertices of
// parallelism 1 is chained into one task, and is a channel again at
// parallelism 2, so a rescale between 1 and more moves operators between
// tasks; so does a checkpoint written before that chaining.

// restoreLayout is every task snapshot of the checkpoint a job restores,
// by the vertex (the uid of the chain's head) that wrote it, and where each
// operator's state lies.
type restoreLayout struct {
	st *store.Store
	id checkpoint.ID
	// tasks holds the snapshots of each checkpointed vertex, by subtask.
	tasks map[string][]*store.TaskSnapshot
	// where names the checkpointed vertex whose snapshots hold each
	// operator's state.
	where map[string]string
}

// readLayout reads every task snapshot of checkpoint id and checks that
// each checkpointed vertex is whole: a snapshot per subtask, all of one
// parallelism and of the job's max parallelism, and that no operator's
// state lies in two vertices.
func readLayout(st *store.Store, id checkpoint.ID, maxParallelism int) (*restoreLayout, error) {
	names, err := st.TaskNames(id)
	if err != nil {
		return nil, fmt.Errorf("restoring checkpoint %d: %w", id, err)
	}
	l := &restoreLayout{st: st, id: id, tasks: map[string][]*store.TaskSnapshot{}, where: map[string]string{}}
	for _, name := range names {
		i := strings.LastIndexByte(name, '-')
		sub, err := strconv.Atoi(name[i+1:])
		if i <= 0 || err != nil || sub < 0 {
			return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s is not named <operator-uid>-<subtask>", id, st.SnapshotPath(id, name))
		}
		vertex := name[:i]
		snap, err := st.ReadTaskSnapshot(id, name)
		if err != nil {
			return nil, fmt.Errorf("restoring checkpoint %d: %w", id, err)
		}
		if snap.MaxParallelism != maxParallelism {
			return nil, fmt.Errorf("restoring checkpoint %d: operator %s was checkpointed with max parallelism %d, the job now has %d; the max parallelism (the number of key groups) cannot change between a checkpoint and its restore",
				id, vertex, snap.MaxParallelism, maxParallelism)
		}
		if snap.Subtask != sub {
			return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s holds subtask %d", id, name, snap.Subtask)
		}
		snaps := l.tasks[vertex]
		if snaps == nil {
			snaps = make([]*store.TaskSnapshot, snap.Parallelism)
			l.tasks[vertex] = snaps
		}
		if len(snaps) != snap.Parallelism {
			return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s says parallelism %d, but other snapshots of %s say %d",
				id, snap.Task, snap.Parallelism, vertex, len(snaps))
		}
		snaps[sub] = snap
	}
	for vertex, snaps := range l.tasks {
		for s, snap := range snaps {
			if snap == nil {
				return nil, fmt.Errorf("restoring checkpoint %d: the snapshot of task %s is missing (the checkpoint holds %d subtasks of %s)",
					id, store.SnapshotName(vertex, s), len(snaps), vertex)
			}
		}
		for _, op := range snaps[0].Operators {
			if other, ok := l.where[op.UID]; ok && other != vertex {
				return nil, fmt.Errorf("restoring checkpoint %d: the state of operator %s is in the snapshots of both %s and %s", id, op.UID, other, vertex)
			}
			l.where[op.UID] = vertex
		}
	}
	return l, nil
}

// vertexRestore is what one vertex restores from.
type vertexRestore struct {
	// tasks are the snapshots of the head's task in every subtask the
	// checkpoint had, the head's state first (TaskContext.Restored or
	// Rescaled): its watermark and in-flight records. Nil when the head
	// has no state in the checkpoint.
	tasks []*store.TaskSnapshot
	// ops holds each operator's snapshots in every subtask of the task
	// that held it, by old subtask (TaskContext.RestoredOperators); nil
	// when none of the vertex's operators is named in the checkpoint, and
	// the vertex restores from the snapshots of its uid alone.
	ops map[string][]*store.OperatorSnapshot
}

// vertex returns what vx restores from: each operator's state where the
// checkpoint holds it, at the parallelism it was taken at (which may be
// another than vx's, and differ between the operators of vx).
func (l *restoreLayout) vertex(vx *Vertex) (*vertexRestore, error) {
	ops := vx.Operators
	if len(ops) == 0 {
		ops = []string{vx.UID}
	}
	r := &vertexRestore{}
	for _, uid := range ops {
		v, ok := l.where[uid]
		if !ok {
			continue // an operator new to the job
		}
		if r.ops == nil {
			r.ops = map[string][]*store.OperatorSnapshot{}
		}
		snaps := l.tasks[v]
		list := make([]*store.OperatorSnapshot, len(snaps))
		for s, snap := range snaps {
			if list[s] = snap.Operator(uid); list[s] == nil {
				return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s lacks operator %s, which %s holds", l.id, snap.Task, uid, snaps[0].Task)
			}
		}
		r.ops[uid] = list
	}
	head := ops[0]
	switch v, ok := l.where[head]; {
	case r.ops == nil:
		// None of the operators is named in the checkpoint: the vertex's
		// own snapshots, if any, hold its state under other names.
		r.tasks = l.tasks[vx.UID]
		if r.tasks == nil {
			// The error of reading the snapshot the vertex would have
			// names the missing file.
			_, err := l.st.ReadTaskSnapshot(l.id, store.SnapshotName(vx.UID, 0))
			if err == nil {
				err = errors.New("it appeared after the checkpoint's snapshots were read")
			}
			return nil, fmt.Errorf("restoring checkpoint %d: it holds no state of operator %s (a job restores only from checkpoints of its own operators): %w", l.id, vx.UID, err)
		}
	case !ok:
		// A new head: its task starts afresh, the operators after it
		// restore their own state.
	case v == vx.UID:
		r.tasks = l.tasks[v]
	default:
		// The head's state lies in another task: its task snapshots are
		// put together, with the head's state first.
		for s, op := range r.ops[head] {
			r.tasks = append(r.tasks, &store.TaskSnapshot{
				Checkpoint: l.id, Task: store.SnapshotName(vx.UID, s),
				Subtask: s, Parallelism: len(r.ops[head]), MaxParallelism: l.tasks[v][s].MaxParallelism,
				Operators: []store.OperatorSnapshot{*op},
			})
		}
	}
	if len(r.tasks) != 0 && len(r.tasks) != vx.Parallelism {
		for _, snap := range r.tasks {
			if len(snap.Operators) > 0 && len(snap.Operators[0].InFlight) > 0 {
				return nil, fmt.Errorf("restoring checkpoint %d: task %s holds in-flight records of an unaligned checkpoint, which cannot be redistributed from parallelism %d to %d; restore it at parallelism %d, or restore an aligned checkpoint",
					l.id, snap.Task, len(r.tasks), vx.Parallelism, len(r.tasks))
			}
		}
	}
	return r, nil
}

// checkInFlight refuses the in-flight records of an unaligned checkpoint
// when the job's tasks are not the checkpointed job's: a task numbers its
// input channels by the tasks upstream, so records captured in one
// channel would be replayed into another input, or into none.
func (l *restoreLayout) checkInFlight(g *JobGraph) error {
	why := l.layoutDiffers(g)
	if why == "" {
		return nil
	}
	vertices := make([]string, 0, len(l.tasks))
	for v := range l.tasks {
		vertices = append(vertices, v)
	}
	slices.Sort(vertices)
	for _, v := range vertices {
		for _, snap := range l.tasks[v] {
			for _, op := range snap.Operators {
				if len(op.InFlight) > 0 {
					return fmt.Errorf("restoring checkpoint %d: task %s holds in-flight records of an unaligned checkpoint, but the job's tasks are not the checkpointed job's (%s), so they cannot be replayed into the inputs they were taken from; restore an aligned checkpoint, or restore with the parallelism and 'clink.operator-chaining.keyed' (Options.KeyedChaining) the checkpoint was taken with",
						l.id, snap.Task, why)
				}
			}
		}
	}
	return nil
}

// layoutDiffers says how the tasks of g differ from the checkpoint's, or
// returns "" when each vertex of g has a task of the same operators in
// the checkpoint and the checkpoint no other task.
func (l *restoreLayout) layoutDiffers(g *JobGraph) string {
	for _, vx := range g.Vertices {
		snaps := l.tasks[vx.UID]
		if snaps == nil {
			return fmt.Sprintf("the checkpoint has no task %s", vx.UID)
		}
		if vx.Operators == nil {
			continue
		}
		var had []string
		for _, op := range snaps[0].Operators {
			had = append(had, op.UID)
		}
		has := slices.Clone(vx.Operators)
		slices.Sort(had)
		slices.Sort(has)
		if !slices.Equal(had, has) {
			return fmt.Sprintf("task %s held operators %s and holds %s now", vx.UID, strings.Join(had, ", "), strings.Join(has, ", "))
		}
	}
	if len(l.tasks) != len(g.Vertices) {
		return fmt.Sprintf("the checkpointed job had %d chains of operators, this one has %d", len(l.tasks), len(g.Vertices))
	}
	return ""
}
