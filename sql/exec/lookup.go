package exec

import (
	"fmt"
	"sync"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func init() { registerNode(buildLookupJoin) }

// buildLookupJoin builds a lookup join as a clink.FlatMap over the probe
// side, chained into its task (no exchange): every probe row is joined,
// with its kind, with the lookup table's rows of its key. The table is a
// bounded filesystem table read whole, in one pass, when the first probe
// row arrives, and kept in memory, shared by the operator's subtasks. It
// is static input, so the operator has no state: a job built anew (a
// restore) reads the table again. A read that fails is tried again on
// the next row, after the job restarts.
func buildLookupJoin(b *builder, n *planner.LookupJoin) (clink.Stream[types.Row], error) {
	in, err := b.stream(n.Input)
	if err != nil {
		return in, err
	}
	// Check the table's format now, so that a bad option fails the build.
	if _, _, err := fileRecordSource(n.Table); err != nil {
		return in, err
	}
	tbl := &lookupTable{n: n}
	nr := len(n.TableFields())
	return clink.FlatMap(in, n.UID(), func(r types.Row, out *clink.Collector[types.Row]) error {
		idx, err := tbl.get()
		if err != nil {
			return err
		}
		matched := false
		if key, ok, err := lookupProbeKey(n, r.Values); err != nil {
			return err
		} else if ok {
			for _, side := range idx[key] {
				vals := make([]types.Value, 0, len(r.Values)+nr)
				vals = append(append(vals, r.Values...), side...)
				if n.Condition != nil {
					v, err := n.Condition.Eval(vals)
					if err != nil {
						return fmt.Errorf("operator %s: evaluating %s on %s: %w", n.UID(), n.Text, types.Row{Kind: r.Kind, Values: vals}, err)
					}
					if v.IsNull() || !v.Bool() {
						continue
					}
				}
				matched = true
				out.Collect(types.Row{Kind: r.Kind, Values: vals})
			}
		}
		if !matched && n.Type == planner.LeftOuterJoin {
			vals := make([]types.Value, len(r.Values)+nr)
			copy(vals, r.Values)
			for i := len(r.Values); i < len(vals); i++ {
				vals[i] = types.Null
			}
			out.Collect(types.Row{Kind: r.Kind, Values: vals})
		}
		return nil
	}), nil
}

// lookupProbeKey encodes the key of a probe row; ok is false when a key
// value is NULL, which matches nothing.
func lookupProbeKey(n *planner.LookupJoin, row []types.Value) (string, bool, error) {
	var k []byte
	for _, key := range n.Keys {
		v, err := key.Probe.Eval(row)
		if err != nil {
			return "", false, fmt.Errorf("operator %s: evaluating the lookup key %s: %w", n.UID(), key.Text, err)
		}
		if v.IsNull() {
			return "", false, nil
		}
		k = types.AppendKey(k, v)
	}
	return string(k), true, nil
}

// lookupTable is a lookup join's table, loaded once: its rows by key.
type lookupTable struct {
	n  *planner.LookupJoin
	mu struct {
		sync.Mutex
		// rows is nil until the table is read; then it is never written
		// again and is read without the lock by whoever got it from get.
		rows map[string][][]types.Value
	}
}

// get returns the table's rows by key, reading the table the first time.
func (t *lookupTable) get() (map[string][][]types.Value, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.rows != nil {
		return t.mu.rows, nil
	}
	rows, err := t.read()
	if err != nil {
		return nil, err
	}
	t.mu.rows = rows
	return rows, nil
}

// read reads every row of the table, in file order.
func (t *lookupTable) read() (map[string][][]types.Value, error) {
	n := t.n
	src, _, err := fileRecordSource(n.Table)
	if err != nil {
		return nil, err
	}
	r, err := src.Open(connector.SourceContext{UID: n.UID(), Subtask: 0, Parallelism: 1, MaxParallelism: 1}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("reading lookup table '%s': %w", n.Table.Name, err)
	}
	defer r.Close()
	rows := map[string][][]types.Value{}
	var kerr error
	emit := func(row types.Row, _ int64) error {
		var k []byte
		for _, key := range n.Keys {
			v := row.Values[key.Column]
			if key.ColumnCast != nil && !v.IsNull() {
				if v, kerr = key.ColumnCast.Eval(row.Values); kerr != nil {
					return fmt.Errorf("reading lookup table '%s': converting column '%s' of %s: %w", n.Table.Name, n.TableFields()[key.Column].Name, row, kerr)
				}
			}
			if v.IsNull() {
				// NULL equals nothing: the row is never found.
				return nil
			}
			k = types.AppendKey(k, v)
		}
		rows[string(k)] = append(rows[string(k)], row.Values)
		return nil
	}
	for {
		st, err := r.Read(1024, emit)
		if err != nil {
			return nil, fmt.Errorf("reading lookup table '%s': %w", n.Table.Name, err)
		}
		if st == connector.Done {
			return rows, nil
		}
	}
}
