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

// vertex returns the snapshots vx restores from, one per subtask the
// checkpoint had: its own when the checkpoint holds its operators' state in
// the snapshots of a vertex of its uid, otherwise snapshots put together
// from the operators' states where they lie. Their parallelism may differ
// from vx's (a rescale); in-flight records of an unaligned checkpoint can
// neither be redistributed nor move to an operator that now reads them from
// a chain rather than a channel.
func (l *restoreLayout) vertex(vx *Vertex) ([]*store.TaskSnapshot, error) {
	ops := vx.Operators
	if len(ops) == 0 {
		ops = []string{vx.UID}
	}
	var holders []string
	for _, uid := range ops {
		if v, ok := l.where[uid]; ok && !slices.Contains(holders, v) {
			holders = append(holders, v)
		}
	}
	var snaps []*store.TaskSnapshot
	switch {
	case len(holders) == 0 || len(holders) == 1 && holders[0] == vx.UID:
		snaps = l.tasks[vx.UID]
		if snaps == nil {
			// The error of reading the snapshot the vertex would have
			// names the missing file.
			_, err := l.st.ReadTaskSnapshot(l.id, store.SnapshotName(vx.UID, 0))
			if err == nil {
				err = errors.New("it appeared after the checkpoint's snapshots were read")
			}
			return nil, fmt.Errorf("restoring checkpoint %d: it holds no state of operator %s (a job restores only from checkpoints of its own operators): %w", l.id, vx.UID, err)
		}
	default:
		var err error
		if snaps, err = l.gather(vx, ops, holders); err != nil {
			return nil, err
		}
	}
	if len(snaps) != vx.Parallelism {
		for _, snap := range snaps {
			for _, op := range snap.Operators {
				if len(op.InFlight) > 0 {
					return nil, fmt.Errorf("restoring checkpoint %d: task %s holds in-flight records of an unaligned checkpoint, which cannot be redistributed from parallelism %d to %d; restore it at parallelism %d, or restore an aligned checkpoint",
						l.id, snap.Task, len(snaps), vx.Parallelism, len(snaps))
				}
			}
		}
	}
	return snaps, nil
}

// gather puts together the snapshots of vx, whose operators ops (head
// first) the checkpoint holds in the snapshots of the vertices holders.
func (l *restoreLayout) gather(vx *Vertex, ops, holders []string) ([]*store.TaskSnapshot, error) {
	p := len(l.tasks[holders[0]])
	for _, h := range holders[1:] {
		if n := len(l.tasks[h]); n != p {
			return nil, fmt.Errorf("restoring checkpoint %d: operators of task %s were checkpointed at parallelism %d (in %s) and %d (in %s); they can restore into one chain only from one parallelism",
				l.id, vx.UID, p, holders[0], n, h)
		}
	}
	head := ops[0]
	if _, ok := l.where[head]; !ok {
		return nil, fmt.Errorf("restoring checkpoint %d: it holds no state of operator %s, but does of the operators chained after it", l.id, head)
	}
	snaps := make([]*store.TaskSnapshot, p)
	for s := range p {
		snap := &store.TaskSnapshot{
			Checkpoint: l.id, Task: store.SnapshotName(vx.UID, s),
			Subtask: s, Parallelism: p, MaxParallelism: l.tasks[holders[0]][s].MaxParallelism,
		}
		for _, uid := range ops {
			v, ok := l.where[uid]
			if !ok {
				continue // an operator new to the job
			}
			from := l.tasks[v][s]
			op := findSnapshot(from, uid)
			if op == nil {
				return nil, fmt.Errorf("restoring checkpoint %d: snapshot %s lacks operator %s, which %s holds", l.id, from.Task, uid, l.tasks[v][0].Task)
			}
			if len(op.InFlight) > 0 && (uid != head || from.Operators[0].UID != uid) {
				return nil, fmt.Errorf("restoring checkpoint %d: operator %s holds in-flight records of an unaligned checkpoint, and it is chained differently now (it was in task %s, it is in %s); restore the checkpoint with the parallelism it was taken at, or restore an aligned checkpoint",
					l.id, uid, from.Task, snap.Task)
			}
			snap.Operators = append(snap.Operators, *op)
		}
		snaps[s] = snap
	}
	return snaps, nil
}

func findSnapshot(snap *store.TaskSnapshot, uid string) *store.OperatorSnapshot {
	for i := range snap.Operators {
		if snap.Operators[i].UID == uid {
			return &snap.Operators[i]
		}
	}
	return nil
}
