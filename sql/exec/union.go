package exec

import (
	"strconv"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

func init() { registerNode(buildUnion) }

// buildUnion merges the inputs' streams with clink.Union. An input that
// appears twice (UNION ALL of one sub-plan with itself) is read twice.
func buildUnion(b *builder, n *planner.Union) (clink.Stream[types.Row], error) {
	var ins []clink.Stream[types.Row]
	seen := map[string]int{}
	for _, in := range n.Union {
		s, err := b.stream(in)
		if err != nil {
			return s, err
		}
		// The same stream twice would be one edge twice; a pass-through
		// copy makes it a second input.
		if k := seen[in.UID()]; k > 0 {
			s = clink.Map(s, in.UID()+".copy"+strconv.Itoa(k), func(r types.Row) types.Row { return r })
		}
		seen[in.UID()]++
		ins = append(ins, s)
	}
	return clink.Union(n.UID(), ins...), nil
}
