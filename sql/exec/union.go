package exec

import (
	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func init() { registerNode(buildUnion) }

// buildUnion merges the inputs' streams with clink.Union, which keeps the
// order of each upstream subtask's rows (an updating input's -U before
// its +U). An input listed twice (one sub-plan united with itself) is
// read twice.
func buildUnion(b *builder, n *planner.Union) (clink.Stream[types.Row], error) {
	ins := make([]clink.Stream[types.Row], len(n.Union))
	for i, in := range n.Union {
		s, err := b.stream(in)
		if err != nil {
			return s, err
		}
		ins[i] = s
	}
	return clink.Union(n.UID(), ins...), nil
}
