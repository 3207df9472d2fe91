package state

import (
	"encoding/binary"
	"fmt"
)

// Redistribution says how an operator list state is divided among the
// subtasks of a job restored at another parallelism (Flink's operator
// state modes).
type Redistribution uint8

const (
	// Split gives the elements of every old subtask, in order, round-robin
	// to the new subtasks: each element goes to exactly one.
	Split Redistribution = iota
	// Union gives every new subtask all elements of every old subtask.
	Union
)

// String returns "split" or "union".
func (r Redistribution) String() string {
	if r == Union {
		return "union"
	}
	return "split"
}

// OperatorListState is non-keyed state of one operator subtask: a list of
// elements that a rescale redistributes by its Redistribution. It is used
// on the task goroutine only; Snapshot copies it.
type OperatorListState[T any] struct {
	name  string
	mode  Redistribution
	codec Codec[T]
	items []T
}

// NewOperatorList returns an empty operator list state.
func NewOperatorList[T any](name string, mode Redistribution) (*OperatorListState[T], error) {
	if err := CheckCodec[T](); err != nil {
		return nil, fmt.Errorf("operator state %q cannot be checkpointed: %w", name, err)
	}
	return &OperatorListState[T]{name: name, mode: mode, codec: CodecFor[T]()}, nil
}

// Name returns the state's name.
func (s *OperatorListState[T]) Name() string { return s.name }

// Get returns the elements; the caller must not modify the slice.
func (s *OperatorListState[T]) Get() []T { return s.items }

// Update replaces the elements.
func (s *OperatorListState[T]) Update(items []T) { s.items = append(s.items[:0:0], items...) }

// Add appends an element.
func (s *OperatorListState[T]) Add(v T) { s.items = append(s.items, v) }

// Snapshot encodes the elements: the redistribution mode, a count, then
// the elements.
func (s *OperatorListState[T]) Snapshot() []byte {
	b := []byte{byte(s.mode)}
	b = binary.AppendUvarint(b, uint64(len(s.items)))
	for _, v := range s.items {
		b = s.codec.Append(b, v)
	}
	return b
}

// Restore sets the elements this subtask gets from the snapshots of every
// old subtask (in subtask order), given its index and the new parallelism.
// Without a rescale, pass only the subtask's own snapshot with subtask 0
// and parallelism 1.
func (s *OperatorListState[T]) Restore(old [][]byte, subtask, parallelism int) error {
	var all []T
	for i, b := range old {
		if len(b) == 0 {
			continue
		}
		if Redistribution(b[0]) != s.mode {
			return fmt.Errorf("restoring operator state %q: checkpointed with %v redistribution, now %v", s.name, Redistribution(b[0]), s.mode)
		}
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)) {
			return fmt.Errorf("restoring operator state %q of old subtask %d: bad element count", s.name, i)
		}
		data := b[1+k:]
		for j := uint64(0); j < n; j++ {
			v, c, err := s.codec.Decode(data)
			if err != nil {
				return fmt.Errorf("restoring operator state %q of old subtask %d, element %d: %w", s.name, i, j, err)
			}
			data = data[c:]
			all = append(all, v)
		}
		if len(data) != 0 {
			return fmt.Errorf("restoring operator state %q of old subtask %d: %d bytes left after %d elements", s.name, i, len(data), n)
		}
	}
	s.items = nil
	for i, v := range all {
		if s.mode == Union || i%parallelism == subtask {
			s.items = append(s.items, v)
		}
	}
	return nil
}
