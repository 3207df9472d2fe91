package expr

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/types"
)

// Column is a resolved column reference: where its value is in the input
// row, and its type. A reference to a field of a ROW column (`bid.price`,
// `t.bid.price`) has the ROW column's Index and a Path of field indexes,
// outermost first; Type is then the field's type, nullable when any ROW on
// the path is.
type Column struct {
	Index int
	Type  types.Type
	Path  []int
}

// Scope resolves column references of an expression. Errors name the
// reference's position and, for an unknown name, the closest candidates.
type Scope interface {
	Resolve(ref *ast.ColumnRef) (Column, error)
}

// Table is one input of a Tables scope: its name (or alias) and its
// columns. The columns occupy Offset..Offset+len(Columns)-1 of the row.
type Table struct {
	Name    string
	Columns []types.Field
	Offset  int
}

// Tables is a Scope over one or more tables whose columns are laid out
// side by side in the input row (the output of a join, or one table).
// Names are case-sensitive, as in Flink.
type Tables []Table

// NewTable returns a one-table scope with columns at offset 0.
func NewTable(name string, columns ...types.Field) Tables {
	return Tables{{Name: name, Columns: columns}}
}

// Resolve finds `col` in every table, or `table.col` in one.
func (ts Tables) Resolve(ref *ast.ColumnRef) (Column, error) {
	switch len(ref.Parts) {
	case 1:
		name := ref.Parts[0]
		var found []Column
		var where []string
		for _, t := range ts {
			for i, c := range t.Columns {
				if c.Name == name {
					found = append(found, Column{Index: t.Offset + i, Type: c.Type})
					where = append(where, t.Name+"."+name)
				}
			}
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
			var cands []string
			for _, t := range ts {
				for _, c := range t.Columns {
					cands = append(cands, c.Name)
				}
			}
			in := ""
			if len(ts) == 1 && ts[0].Name != "" {
				in = fmt.Sprintf(" in table '%s'", ts[0].Name)
			} else if len(ts) > 1 {
				in = " in any table of the FROM clause"
			}
			return Column{}, errorf(ref.Pos, "column '%s' not found%s%s", name, in, didYouMean(name, cands))
		default:
			return Column{}, errorf(ref.Pos, "column reference '%s' is ambiguous; it could be %s", name, strings.Join(where, " or "))
		}
	default:
		tname, name := ref.Parts[0], ref.Parts[1]
		var names []string
		for _, t := range ts {
			names = append(names, t.Name)
			if t.Name != tname {
				continue
			}
			var cands []string
			for i, c := range t.Columns {
				if c.Name == name {
					return fieldPath(ref, Column{Index: t.Offset + i, Type: c.Type}, 2)
				}
				cands = append(cands, c.Name)
			}
			return Column{}, errorf(ref.Pos, "column '%s' not found in table '%s'%s", name, tname, didYouMean(name, cands))
		}
		// Not a table: maybe a field of a ROW column, col.field.
		if c, err := ts.Resolve(&ast.ColumnRef{Pos: ref.Pos, Parts: ref.Parts[:1]}); err == nil && c.Type.Kind == types.KindRow {
			return fieldPath(ref, c, 1)
		}
		return Column{}, errorf(ref.Pos, "table '%s' not found%s", tname, didYouMean(tname, names))
	}
}

// fieldPath resolves ref.Parts[from:], fields of nested ROWs, below the
// column c.
func fieldPath(ref *ast.ColumnRef, c Column, from int) (Column, error) {
	nullable := c.Type.Nullable()
	for k := from; k < len(ref.Parts); k++ {
		name := ref.Parts[k]
		if c.Type.Kind != types.KindRow {
			return Column{}, errorf(ref.Pos, "'%s' is %s, not a ROW: it has no field '%s'", strings.Join(ref.Parts[:k], "."), c.Type, name)
		}
		i := slices.IndexFunc(c.Type.Fields, func(f types.Field) bool { return f.Name == name })
		if i < 0 {
			var cands []string
			for _, f := range c.Type.Fields {
				cands = append(cands, f.Name)
			}
			return Column{}, errorf(ref.Pos, "field '%s' not found in ROW '%s'%s", name, strings.Join(ref.Parts[:k], "."), didYouMean(name, cands))
		}
		c.Path = append(c.Path, i)
		c.Type = c.Type.Fields[i].Type
		nullable = nullable || c.Type.Nullable()
	}
	c.Type = c.Type.WithNotNull(!nullable)
	return c, nil
}

// didYouMean suggests the candidates closest to name (case-insensitive
// edit distance at most a third of the name's length, at least 2).
func didYouMean(name string, cands []string) string {
	best, bestD := []string(nil), 1<<30
	limit := max(2, len(name)/3)
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c] {
			continue
		}
		seen[c] = true
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d > limit {
			continue
		}
		if d < bestD {
			best, bestD = []string{c}, d
		} else if d == bestD {
			best = append(best, c)
		}
	}
	if len(best) == 0 {
		return ""
	}
	sort.Strings(best)
	return "; did you mean '" + strings.Join(best, "' or '") + "'?"
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func errorf(pos ast.Pos, format string, args ...any) error {
	return &types.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}
