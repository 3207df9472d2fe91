package planner

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// WindowKind is the kind of a window table-valued function.
type WindowKind string

// The window TVFs.
const (
	Tumble   WindowKind = "TUMBLE"
	Hop      WindowKind = "HOP"
	Cumulate WindowKind = "CUMULATE"
)

// WindowSpec describes the windows of a window TVF, in milliseconds.
type WindowSpec struct {
	Kind WindowKind
	// TimeCol names the rowtime column the windows follow.
	TimeCol string
	// Size is the window size (the max size of CUMULATE).
	Size int64
	// Slide is HOP's slide; Step is CUMULATE's step.
	Slide, Step int64
}

// String prints the spec as Flink's EXPLAIN does:
// TUMBLE(time_col=[ts], size=[10 s]).
func (w WindowSpec) String() string {
	switch w.Kind {
	case Hop:
		return fmt.Sprintf("HOP(time_col=[%s], size=[%s], slide=[%s])", w.TimeCol, durationText(w.Size), durationText(w.Slide))
	case Cumulate:
		return fmt.Sprintf("CUMULATE(time_col=[%s], max_size=[%s], step=[%s])", w.TimeCol, durationText(w.Size), durationText(w.Step))
	}
	return fmt.Sprintf("TUMBLE(time_col=[%s], size=[%s])", w.TimeCol, durationText(w.Size))
}

// durationText prints milliseconds in the largest unit that divides them,
// as Flink prints window sizes (10 s, 5 min, 1 h).
func durationText(ms int64) string {
	for _, u := range []struct {
		ms   int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}} {
		if ms%u.ms == 0 {
			return fmt.Sprintf("%d %s", ms/u.ms, u.name)
		}
	}
	return fmt.Sprintf("%d ms", ms)
}

// The columns a window TVF appends to its input's.
const (
	windowStart = "window_start"
	windowEnd   = "window_end"
	windowTime  = "window_time"
)

func isWindowColumn(name string) bool {
	return name == windowStart || name == windowEnd || name == windowTime
}

// WindowTableFunction assigns each row to its windows: it emits the row
// once per window, with window_start, window_end and window_time (the new
// rowtime, window_end - 1 ms) appended. Under a GROUP BY window_start,
// window_end it is folded into a WindowAggregate and not run.
type WindowTableFunction struct {
	base
	Input  Node
	Window WindowSpec
	// TimeCol is the input column of the rowtime.
	TimeCol int
}

// WindowAggregate aggregates the rows of each group key and window: it
// keeps accumulators per key and window in keyed state and emits one +I
// row per key and window when the watermark passes the window's end;
// later rows are dropped. Its output is the keys, the aggregates,
// window_start, window_end and window_time (the rowtime).
type WindowAggregate struct {
	base
	Input  Node
	Window WindowSpec
	Keys   []int
	Aggs   []AggCall
	// TimeCol is the input column of the rowtime.
	TimeCol int
}

func (n *WindowTableFunction) Inputs() []Node         { return []Node{n.Input} }
func (n *WindowAggregate) exchange(int) ([]int, bool) { return n.Keys, true }
func (n *WindowAggregate) Inputs() []Node             { return []Node{n.Input} }
func (n *WindowTableFunction) Updating() bool         { return false }
func (n *WindowAggregate) Updating() bool             { return false }
func (n *WindowTableFunction) name() string           { return "WindowTableFunction" }
func (n *WindowAggregate) name() string               { return "WindowAggregate" }

func (n *WindowTableFunction) args() string {
	return "window=[" + n.Window.String() + "]"
}

func (n *WindowAggregate) args() string {
	in := n.Input.Fields()
	var keys []string
	for _, k := range n.Keys {
		keys = append(keys, in[k].Name)
	}
	s := "window=[" + n.Window.String() + "], "
	if len(keys) > 0 {
		s += "groupBy=[" + strings.Join(keys, ", ") + "], "
	}
	sel := append([]string(nil), keys...)
	for i, a := range n.Aggs {
		sel = append(sel, a.Text+" AS "+n.fields[len(n.Keys)+i].Name)
	}
	sel = append(sel, "start('w$) AS window_start", "end('w$) AS window_end", "rowtime('w$) AS window_time")
	return s + "select=[" + strings.Join(sel, ", ") + "]"
}

// windowFields are the three columns a window TVF appends.
func windowFields(rowtime types.Type) []types.Field {
	ts := types.TimestampOf(3).WithNotNull(true)
	return []types.Field{{Name: windowStart, Type: ts}, {Name: windowEnd, Type: ts}, {Name: windowTime, Type: rowtime.WithNotNull(true)}}
}

// windowTVF binds TABLE(TUMBLE(...)), TABLE(HOP(...)) and
// TABLE(CUMULATE(...)).
func (p *Planner) windowTVF(r *ast.TableFunction) (relation, error) {
	call := r.Call
	fname := strings.ToUpper(call.Name.Last())
	var params []string
	switch WindowKind(fname) {
	case Tumble:
		params = []string{"DATA", "TIMECOL", "SIZE"}
	case Hop:
		params = []string{"DATA", "TIMECOL", "SLIDE", "SIZE"}
	case Cumulate:
		params = []string{"DATA", "TIMECOL", "STEP", "SIZE"}
	case "SESSION":
		return relation{}, errorf(r.Pos, "the window table function SESSION is not supported yet")
	default:
		return relation{}, errorf(r.Pos, "table function %s is not supported yet", call.Name.Last())
	}
	if r.Lateral {
		return relation{}, errorf(r.Pos, "LATERAL TABLE(%s(...)) is not supported; write TABLE(%s(...))", fname, fname)
	}
	if len(call.Args) > len(params) {
		return relation{}, errorf(call.Args[len(params)].Position(), "%s takes %d arguments (%s); OFFSET is not supported yet", fname, len(params), strings.Join(params, ", "))
	}
	args := map[string]ast.Expr{}
	named := 0
	for i, a := range call.Args {
		if na, ok := a.(*ast.NamedArg); ok {
			name := strings.ToUpper(na.Name.Name)
			if !containsString(params, name) {
				return relation{}, errorf(na.Pos, "%s has no parameter %s; its parameters are %s", fname, name, strings.Join(params, ", "))
			}
			if _, dup := args[name]; dup {
				return relation{}, errorf(na.Pos, "parameter %s of %s is given twice", name, fname)
			}
			args[name] = na.Value
			named++
			continue
		}
		if named > 0 {
			return relation{}, errorf(a.Position(), "a positional argument cannot follow a named one in %s", fname)
		}
		args[params[i]] = a
	}
	for _, prm := range params {
		if args[prm] == nil {
			return relation{}, errorf(call.Pos, "%s is missing its %s argument", fname, prm)
		}
	}
	ta, ok := args["DATA"].(*ast.TableArg)
	if !ok {
		return relation{}, errorf(args["DATA"].Position(), "the DATA argument of %s must be a table: TABLE name", fname)
	}
	if len(ta.PartitionBy) > 0 {
		return relation{}, errorf(ta.PartitionBy[0].Position(), "%s does not take PARTITION BY", fname)
	}
	in, err := p.bindFrom(&ast.TableName{Pos: ta.Pos, Name: ta.Name})
	if err != nil {
		return relation{}, err
	}
	if in.node.Updating() {
		return relation{}, errorf(r.Pos, "%s doesn't support consuming update changes which is produced by node %s", fname, describe(origin(in.node)))
	}
	d, ok := args["TIMECOL"].(*ast.Descriptor)
	if !ok || len(d.Columns) != 1 {
		return relation{}, errorf(args["TIMECOL"].Position(), "the TIMECOL argument of %s must be DESCRIPTOR(column) naming one column", fname)
	}
	col := d.Columns[0]
	fields := in.node.Fields()
	tc := -1
	for i, f := range fields {
		if f.Name == col.Name {
			tc = i
		}
	}
	if tc < 0 {
		return relation{}, errorf(col.Pos, "column '%s' of DESCRIPTOR not found in table '%s'", col.Name, ta.Name.Last())
	}
	if tc != in.node.Rowtime() {
		return relation{}, errorf(col.Pos, "the window function requires the timecol to be a time attribute type, but '%s' is %s; declare a WATERMARK for it", col.Name, fields[tc].Type)
	}
	w := WindowSpec{Kind: WindowKind(fname), TimeCol: col.Name}
	if w.Size, err = p.windowInterval(args["SIZE"], fname, "SIZE"); err != nil {
		return relation{}, err
	}
	switch w.Kind {
	case Hop:
		if w.Slide, err = p.windowInterval(args["SLIDE"], fname, "SLIDE"); err != nil {
			return relation{}, err
		}
		if w.Size%w.Slide != 0 {
			return relation{}, errorf(args["SIZE"].Position(), "HOP table function based aggregate requires size must be an integral multiple of slide, but got size %d ms and slide %d ms", w.Size, w.Slide)
		}
	case Cumulate:
		if w.Step, err = p.windowInterval(args["STEP"], fname, "STEP"); err != nil {
			return relation{}, err
		}
		if w.Size%w.Step != 0 {
			return relation{}, errorf(args["SIZE"].Position(), "CUMULATE table function based aggregate requires maxSize must be an integral multiple of step, but got maxSize %d ms and step %d ms", w.Size, w.Step)
		}
	}
	n := &WindowTableFunction{Input: in.node, Window: w, TimeCol: tc}
	n.fields = append(append([]types.Field(nil), fields...), windowFields(fields[tc].Type)...)
	n.rowtime = len(n.fields) - 1
	assignUID(n, "")
	name := ta.Name.Last()
	if r.Alias != nil {
		if len(r.Alias.Columns) > 0 {
			return relation{}, errorf(r.Alias.Pos, "column aliases of a window table function are not supported yet")
		}
		name = r.Alias.Name
	}
	return relation{node: n, name: name}, nil
}

// windowInterval evaluates a window size, slide or step: a constant
// positive day-time interval, in milliseconds.
func (p *Planner) windowInterval(e ast.Expr, fname, param string) (int64, error) {
	c, err := p.compiler.Compile(e, expr.Tables{})
	if err != nil {
		return 0, err
	}
	if !c.Constant || c.Type.Kind != types.KindIntervalDayTime {
		return 0, errorf(e.Position(), "the %s argument of %s must be a constant INTERVAL DAY TO SECOND such as INTERVAL '10' SECOND, not %s", param, fname, c.Type)
	}
	v, err := c.Eval(nil)
	if err != nil {
		return 0, errorf(e.Position(), "evaluating the %s argument of %s: %v", param, fname, err)
	}
	if v.IsNull() || v.Int64() <= 0 {
		return 0, errorf(e.Position(), "the %s argument of %s must be a positive interval", param, fname)
	}
	return v.Int64(), nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// windowColumnRef returns the first reference to window_start,
// window_end or window_time in e, or nil.
func windowColumnRef(e ast.Expr) *ast.ColumnRef {
	var found *ast.ColumnRef
	walk(e, func(x ast.Expr) bool {
		if r, ok := x.(*ast.ColumnRef); ok && isWindowColumn(r.Parts[len(r.Parts)-1]) {
			found = r
		}
		return found == nil
	})
	return found
}

// windowAggregate plans the WindowAggregate over in (the Calc computing
// the keys, the aggregates' arguments and, last, the rowtime) and the Calc
// of HAVING and the select list over its output.
func (p *Planner) windowAggregate(tvf *WindowTableFunction, in Node, scope expr.Tables, s *ast.Select, aggs []*ast.Call,
	refs []argRef, groups []ast.Expr, winRole []int, post []ast.Expr, having ast.Expr, names []string) (Node, error) {
	w := &WindowAggregate{Input: in, Window: tvf.Window, TimeCol: len(in.Fields()) - 1}
	cols := map[string]expr.Column{}
	for i := range groups {
		if winRole[i] < 0 {
			k := len(w.Keys)
			w.Keys = append(w.Keys, k)
			f := in.Fields()[k]
			cols["$g"+strconv.Itoa(i)] = expr.Column{Index: k, Type: f.Type}
			w.fields = append(w.fields, f)
		}
	}
	var err error
	if w.Aggs, err = aggCalls(in, aggs, refs); err != nil {
		return nil, err
	}
	for j, a := range w.Aggs {
		name := "$a" + strconv.Itoa(j)
		cols[name] = expr.Column{Index: len(w.Keys) + j, Type: a.Func.Result}
		w.fields = append(w.fields, types.Field{Name: name, Type: a.Func.Result})
	}
	wf := windowFields(in.Fields()[w.TimeCol].Type)
	base := len(w.fields)
	w.fields = append(w.fields, wf...)
	w.rowtime = len(w.fields) - 1
	for i := range groups {
		if r := winRole[i]; r >= 0 {
			cols["$g"+strconv.Itoa(i)] = expr.Column{Index: base + r, Type: wf[r].Type}
		}
	}
	return p.postCalc(w, w.fields, len(w.Keys), cols, scope, having, post, names)
}
