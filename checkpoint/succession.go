package checkpoint

import "fmt"

// Succession says which subtasks of the run that took a checkpoint a
// subtask of the restored run succeeds: it finalises the two-phase-commit
// handles those old subtasks left pending, and no other new subtask does.
//
// The rule follows the key-group ranges both runs give their subtasks. An
// old subtask is succeeded by the new subtask whose range holds the first
// key group of the old subtask's range. Without a rescale every subtask
// succeeds itself; at a scale-down a subtask succeeds every parent whose
// range starts inside its own; at a scale-up only the first child of a
// parent succeeds it. Every old subtask has exactly one successor.
type Succession struct {
	// OldParallelism is the parallelism of the run that took the
	// checkpoint; NewParallelism is the restored run's.
	OldParallelism, NewParallelism int
	// MaxParallelism is the number of key groups, equal in both runs.
	MaxParallelism int
}

// Validate reports a succession whose parallelisms are out of range.
func (s Succession) Validate() error {
	if s.MaxParallelism <= 0 {
		return fmt.Errorf("succession: max parallelism %d must be positive", s.MaxParallelism)
	}
	for _, p := range []int{s.OldParallelism, s.NewParallelism} {
		if p <= 0 || p > s.MaxParallelism {
			return fmt.Errorf("succession: parallelism %d must be between 1 and the max parallelism %d", p, s.MaxParallelism)
		}
	}
	return nil
}

// rangeStart is the first key group of subtask's range at parallelism p;
// the same arithmetic as the state package's key-group ranges.
func rangeStart(subtask, maxParallelism, p int) int {
	return (subtask*maxParallelism + p - 1) / p
}

// Successor returns the new subtask that succeeds old subtask old.
func (s Succession) Successor(old int) int {
	if s.OldParallelism == s.NewParallelism {
		return old
	}
	kg := rangeStart(old, s.MaxParallelism, s.OldParallelism)
	return kg * s.NewParallelism / s.MaxParallelism
}

// Parents returns, in ascending order, the old subtasks that new subtask
// sub succeeds.
func (s Succession) Parents(sub int) []int {
	var out []int
	for old := 0; old < s.OldParallelism; old++ {
		if s.Successor(old) == sub {
			out = append(out, old)
		}
	}
	return out
}

// Succeeds reports whether new subtask sub succeeds old subtask old.
func (s Succession) Succeeds(sub, old int) bool {
	return old >= 0 && old < s.OldParallelism && s.Successor(old) == sub
}
