package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// Node is an operator of a physical plan. Every node produces changelog
// rows laid out as Fields says.
type Node interface {
	// Fields are the output columns.
	Fields() []types.Field
	// Updating reports whether the output holds -U, +U or -D rows; an
	// insert-only node emits +I rows only.
	Updating() bool
	// Inputs are the nodes this one reads.
	Inputs() []Node
	// Rowtime is the index of the output column that is the event-time
	// attribute (watermarks follow it), or -1.
	Rowtime() int
	// UID is the operator's stable identity in checkpoints.
	UID() string
	// name and args print the node in EXPLAIN: Name(args).
	name() string
	args() string
	// exchange reports the hash exchange in front of input i: the input's
	// key columns, keyed false when the input is forwarded as it is (an
	// empty key list with keyed true is a single-subtask exchange).
	exchange(i int) (keys []int, keyed bool)
	setUID(uid string)
}

// base carries what every node has.
type base struct {
	fields  []types.Field
	rowtime int
	uid     string
}

func (b *base) Fields() []types.Field { return b.fields }
func (b *base) Rowtime() int          { return b.rowtime }
func (b *base) UID() string           { return b.uid }
func (b *base) setUID(uid string)     { b.uid = uid }

// exchange: most nodes read their input in the same task.
func (b *base) exchange(int) ([]int, bool) { return nil, false }

func (n *GroupAggregate) exchange(int) ([]int, bool) { return n.Keys, true }

// Scan reads a table's physical columns from its connector.
type Scan struct {
	base
	Table *catalog.Table
}

// Calc evaluates a filter and projections row by row. It keeps each row's
// kind, so it works on updating input; it is chained into its input's task.
type Calc struct {
	base
	Input Node
	// Filter is nil when every row passes.
	Filter     *expr.Compiled
	FilterText string
	Projs      []*expr.Compiled
	ProjText   []string
	// procAttr is the output column that is the processing-time attribute
	// plus one (0: none); see proctimeOf.
	procAttr int
	// filterReads and projReads are the input columns the filter and
	// each projection read (see ReadsFor); both nil when that is not
	// known.
	filterReads []bool
	projReads   [][]bool
}

// ReadsFor returns which input columns (true at their index) the filter
// and the projections of the output columns marked in out (nil: all of
// them) read, or nil when that is not known: any column may be read.
func (n *Calc) ReadsFor(out []bool) []bool {
	if n.filterReads == nil {
		return nil
	}
	reads := slices.Clone(n.filterReads)
	for i, pr := range n.projReads {
		if out != nil && i < len(out) && !out[i] {
			continue
		}
		for c, r := range pr {
			reads[c] = reads[c] || r
		}
	}
	return reads
}

// WatermarkAssigner gives rows their event time from the rowtime column
// and emits watermarks `max(rowtime) - Delay`.
type WatermarkAssigner struct {
	base
	Input   Node
	DelayMs int64
	Text    string
}

// AggCall is one aggregate of a GroupAggregate.
type AggCall struct {
	Func *expr.AggFunc
	// Arg is the input column of the argument, -1 for COUNT(*).
	Arg int
	// Filter is the input column of the FILTER (WHERE ...) condition, or -1.
	Filter int
	Text   string
}

// GroupAggregate groups its input by key columns and keeps one
// accumulator per aggregate and group in keyed state. Its output is
// updating: +I for a new group, -U/+U when a group's result changes, -D
// when its last row is retracted.
type GroupAggregate struct {
	base
	Input Node
	Keys  []int
	Aggs  []AggCall
}

// Sink writes its input into a table.
type Sink struct {
	base
	Input Node
	Table *catalog.Table
}

func (n *Scan) Inputs() []Node              { return nil }
func (n *Calc) Inputs() []Node              { return []Node{n.Input} }
func (n *WatermarkAssigner) Inputs() []Node { return []Node{n.Input} }
func (n *GroupAggregate) Inputs() []Node    { return []Node{n.Input} }
func (n *Sink) Inputs() []Node              { return []Node{n.Input} }

func (n *Scan) Updating() bool              { return false }
func (n *Calc) Updating() bool              { return n.Input.Updating() }
func (n *WatermarkAssigner) Updating() bool { return n.Input.Updating() }
func (n *GroupAggregate) Updating() bool    { return true }
func (n *Sink) Updating() bool              { return n.Input.Updating() }

func (n *Scan) name() string              { return "TableSourceScan" }
func (n *Calc) name() string              { return "Calc" }
func (n *WatermarkAssigner) name() string { return "WatermarkAssigner" }
func (n *GroupAggregate) name() string    { return "GroupAggregate" }
func (n *Sink) name() string              { return "Sink" }

func fieldNames(fs []types.Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func (n *Scan) args() string {
	return fmt.Sprintf("table=[[%s]], fields=[%s]", n.Table.Name, fieldNames(n.fields))
}

func (n *Calc) args() string {
	sel := make([]string, len(n.Projs))
	in := n.Input.Fields()
	for i, t := range n.ProjText {
		sel[i] = t
		if name := n.fields[i].Name; name != t && !(strings.HasSuffix(t, "."+name)) {
			sel[i] += " AS " + name
		}
		_ = in
	}
	s := "select=[" + strings.Join(sel, ", ") + "]"
	if n.Filter != nil {
		s += ", where=[" + n.FilterText + "]"
	}
	return s
}

func (n *WatermarkAssigner) args() string {
	return fmt.Sprintf("rowtime=[%s], watermark=[%s]", n.fields[n.rowtime].Name, n.Text)
}

func (n *GroupAggregate) args() string {
	in := n.Input.Fields()
	var keys []string
	for _, k := range n.Keys {
		keys = append(keys, in[k].Name)
	}
	sel := append([]string(nil), keys...)
	for i, a := range n.Aggs {
		sel = append(sel, a.Text+" AS "+n.fields[len(n.Keys)+i].Name)
	}
	s := ""
	if len(keys) > 0 {
		s = "groupBy=[" + strings.Join(keys, ", ") + "], "
	}
	return s + "select=[" + strings.Join(sel, ", ") + "]"
}

func (n *Sink) args() string {
	return fmt.Sprintf("table=[%s], fields=[%s]", n.Table.Name, fieldNames(n.Input.Fields()))
}

// changelogMode prints what a node emits, as Flink's EXPLAIN
// CHANGELOG_MODE does.
func changelogMode(n Node) string {
	if n.Updating() {
		return "I,UB,UA,D"
	}
	return "I"
}

// Explain prints a plan as Flink's EXPLAIN does: one line per operator,
// inputs indented below with "+- ", exchanges between tasks shown as
// Exchange lines. With changelog set, every line ends with the node's
// changelog mode; with uids, with its uid.
func Explain(sinks []*Sink, changelog, uids bool) string {
	var b strings.Builder
	b.WriteString("== Physical Plan ==\n")
	for i, s := range sinks {
		if i > 0 {
			b.WriteString("\n")
		}
		explainNode(&b, s, "", "", changelog, uids)
	}
	return b.String()
}

func explainNode(b *strings.Builder, n Node, first, rest string, changelog, uids bool) {
	b.WriteString(first)
	b.WriteString(n.name())
	b.WriteString("(")
	b.WriteString(n.args())
	if changelog {
		b.WriteString(", changelogMode=[" + changelogMode(n) + "]")
	}
	if uids {
		b.WriteString(", uid=[" + n.UID() + "]")
	}
	b.WriteString(")\n")
	inputs := n.Inputs()
	for i, in := range inputs {
		rest := rest
		keys, keyed := n.exchange(i)
		if keyed {
			// The hash exchange in front of a keyed operator.
			dist := "single"
			if len(keys) > 0 {
				var ks []string
				for _, k := range keys {
					ks = append(ks, in.Fields()[k].Name)
				}
				dist = "hash[" + strings.Join(ks, ", ") + "]"
			}
			b.WriteString(rest + "+- Exchange(distribution=[" + dist + "])\n")
			rest += "   "
		}
		explainNode(b, in, rest+"+- ", rest+"   ", changelog, uids)
	}
}

var unsafeUIDChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// assignUID names a node in checkpoints: its kind, a hint (a table name)
// and a hash of its description and its inputs' uids. The same statement
// planned again gets the same uids, so a job restores from its own
// checkpoints; changing an operator (or anything below it) changes its uid,
// and the restore then refuses the old state instead of misreading it.
func assignUID(n Node, hint string) {
	h := sha256.New()
	fmt.Fprintf(h, "%s(%s)|%s", n.name(), n.args(), changelogMode(n))
	for _, f := range n.Fields() {
		fmt.Fprintf(h, "|%s %s", f.Name, f.Type)
	}
	for _, in := range n.Inputs() {
		fmt.Fprintf(h, "|in:%s", in.UID())
	}
	sum := hex.EncodeToString(h.Sum(nil))[:10]
	kind := strings.ToLower(n.name())
	if hint != "" {
		kind += "_" + strings.Trim(unsafeUIDChars.ReplaceAllString(hint, "_"), "_")
	}
	n.setUID(kind + "_" + sum)
}
