package planner

import (
	"fmt"
	"slices"
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
	Session  WindowKind = "SESSION"
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
	// Gap is SESSION's gap: a session ends after Gap without rows.
	Gap int64
	// Partition names SESSION's PARTITION BY columns: sessions form per
	// value of them.
	Partition []string
	// ProcTime marks windows of processing time (TimeCol is a PROCTIME()
	// column): they follow the wall clock, see proctime.go.
	ProcTime bool
}

// String prints the spec as Flink's EXPLAIN does:
// TUMBLE(time_col=[ts], size=[10 s]).
func (w WindowSpec) String() string {
	switch w.Kind {
	case Hop:
		return fmt.Sprintf("HOP(time_col=[%s], size=[%s], slide=[%s])", w.TimeCol, durationText(w.Size), durationText(w.Slide))
	case Cumulate:
		return fmt.Sprintf("CUMULATE(time_col=[%s], max_size=[%s], step=[%s])", w.TimeCol, durationText(w.Size), durationText(w.Step))
	case Session:
		s := fmt.Sprintf("SESSION(time_col=[%s], gap=[%s]", w.TimeCol, durationText(w.Gap))
		if len(w.Partition) > 0 {
			s += ", partition keys=[" + strings.Join(w.Partition, ", ") + "]"
		}
		return s + ")"
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
//
// A SESSION one cannot know a row's window before the session ends: it
// keeps the rows of each open session (per value of the PARTITION BY
// columns) in keyed state and emits them when the watermark passes the
// session's end.
type WindowTableFunction struct {
	base
	Input  Node
	Window WindowSpec
	// TimeCol is the input column of the rowtime.
	TimeCol int
	// Partition are the input columns of SESSION's PARTITION BY.
	Partition []int
	// timeRef is set on the window of a group window aggregation (GROUP
	// BY TUMBLE(ts, ...)), which is never run: the time column as the
	// query wrote it.
	timeRef ast.Expr
}

// WindowAggregate aggregates the rows of each group key and window: it
// keeps accumulators per key and window in keyed state and emits one +I
// row per key and window when the watermark passes the window's end;
// later rows are dropped. Its output is the keys, the aggregates,
// window_start, window_end and window_time (the rowtime). SESSION windows
// form per group key and merge their accumulators when a row bridges two
// sessions.
type WindowAggregate struct {
	base
	Input  Node
	Window WindowSpec
	Keys   []int
	Aggs   []AggCall
	// TimeCol is the input column of the rowtime.
	TimeCol int
	// Legacy marks a group window aggregation (GROUP BY TUMBLE(ts, ...)):
	// the same operator, shown as Flink's GroupWindowAggregate.
	Legacy bool
	// Attached marks a window aggregation over the result of another one
	// (GROUP BY the window_start and window_end it emitted; Flink's
	// attached windowing): a row's window is not assigned from its time
	// but read from its input columns StartCol and EndCol. Window is the
	// windows of the aggregation below.
	Attached         bool
	StartCol, EndCol int
}

func (n *WindowTableFunction) exchange(int) ([]int, bool) {
	if n.Window.Kind == Session {
		return n.Partition, true
	}
	return nil, false
}
func (n *WindowTableFunction) Inputs() []Node         { return []Node{n.Input} }
func (n *WindowAggregate) exchange(int) ([]int, bool) { return n.Keys, true }
func (n *WindowAggregate) Inputs() []Node             { return []Node{n.Input} }
func (n *WindowTableFunction) Updating() bool         { return false }
func (n *WindowAggregate) Updating() bool             { return false }
func (n *WindowTableFunction) name() string           { return "WindowTableFunction" }
func (n *WindowAggregate) name() string {
	if n.Legacy {
		return "GroupWindowAggregate"
	}
	return "WindowAggregate"
}

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
	if n.Attached {
		// As Flink prints a window attached to its input's columns.
		w := n.Window.String()
		w = strings.Replace(w, "time_col=["+n.Window.TimeCol+"]", "win_start=["+in[n.StartCol].Name+"], win_end=["+in[n.EndCol].Name+"]", 1)
		s = "window=[" + w + "], "
	}
	if len(keys) > 0 {
		s += "groupBy=[" + strings.Join(keys, ", ") + "], "
	}
	if n.Legacy {
		s = ""
		if len(keys) > 0 {
			s = "groupBy=[" + strings.Join(keys, ", ") + "], "
		}
		s += "window=[" + n.Window.groupWindow() + "], properties=[w$start, w$end, w$rowtime], "
	}
	sel := append([]string(nil), keys...)
	for i, a := range n.Aggs {
		sel = append(sel, a.Text+" AS "+n.fields[len(n.Keys)+i].Name)
	}
	if n.Legacy {
		sel = append(sel, "start('w$) AS w$start", "end('w$) AS w$end", "rowtime('w$) AS w$rowtime")
	} else {
		timeProp := "rowtime('w$) AS window_time"
		if n.Window.ProcTime {
			timeProp = "proctime('w$) AS window_time"
		}
		sel = append(sel, "start('w$) AS window_start", "end('w$) AS window_end", timeProp)
	}
	return s + "select=[" + strings.Join(sel, ", ") + "]"
}

// groupWindow prints the window of a group window aggregation as Flink's
// EXPLAIN does: TumblingGroupWindow('w$, ts, 10000).
func (w WindowSpec) groupWindow() string {
	switch w.Kind {
	case Hop:
		return fmt.Sprintf("SlidingGroupWindow('w$, %s, %d, %d)", w.TimeCol, w.Size, w.Slide)
	case Session:
		return fmt.Sprintf("SessionGroupWindow('w$, %s, %d)", w.TimeCol, w.Gap)
	}
	return fmt.Sprintf("TumblingGroupWindow('w$, %s, %d)", w.TimeCol, w.Size)
}

// windowFields are the three columns a window TVF appends.
func windowFields(rowtime types.Type) []types.Field {
	ts := types.TimestampOf(3).WithNotNull(true)
	return []types.Field{{Name: windowStart, Type: ts}, {Name: windowEnd, Type: ts}, {Name: windowTime, Type: rowtime.WithNotNull(true)}}
}

// windowTVF binds TABLE(TUMBLE(...)), TABLE(HOP(...)),
// TABLE(CUMULATE(...)) and TABLE(SESSION(...)).
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
	case Session:
		params = []string{"DATA", "TIMECOL", "GAP"}
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
	if len(ta.PartitionBy) > 0 && WindowKind(fname) != Session {
		return relation{}, errorf(ta.PartitionBy[0].Position(), "%s does not take PARTITION BY; only SESSION does", fname)
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
	proc := tc != in.node.Rowtime() && tc == proctimeOf(in.node)
	if tc != in.node.Rowtime() && !proc {
		return relation{}, errorf(col.Pos, "the window function requires the timecol to be a time attribute type, but '%s' is %s; declare a WATERMARK for it", col.Name, fields[tc].Type)
	}
	if err := procWindowCheck(proc, fname, col.Pos); err != nil {
		return relation{}, err
	}
	w := WindowSpec{Kind: WindowKind(fname), TimeCol: col.Name, ProcTime: proc}
	if w.Kind == Session {
		if w.Gap, err = p.windowInterval(args["GAP"], fname, "GAP"); err != nil {
			return relation{}, err
		}
	} else if w.Size, err = p.windowInterval(args["SIZE"], fname, "SIZE"); err != nil {
		return relation{}, err
	}
	var part []int
	for _, e := range ta.PartitionBy {
		ref, ok := e.(*ast.ColumnRef)
		if !ok || len(ref.Parts) > 2 || len(ref.Parts) == 2 && ref.Parts[0] != ta.Name.Last() {
			return relation{}, errorf(e.Position(), "the PARTITION BY of SESSION takes columns of table '%s', not %s", ta.Name.Last(), e)
		}
		name := ref.Parts[len(ref.Parts)-1]
		i := slices.IndexFunc(fields, func(f types.Field) bool { return f.Name == name })
		if i < 0 {
			return relation{}, errorf(e.Position(), "column '%s' of PARTITION BY not found in table '%s'", name, ta.Name.Last())
		}
		if slices.Contains(part, i) {
			return relation{}, errorf(e.Position(), "column '%s' is listed twice in PARTITION BY", name)
		}
		part = append(part, i)
		w.Partition = append(w.Partition, name)
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
	n := &WindowTableFunction{Input: in.node, Window: w, TimeCol: tc, Partition: part}
	n.fields = append(append([]types.Field(nil), fields...), windowFields(fields[tc].Type)...)
	n.rowtime = len(n.fields) - 1
	if proc {
		n.rowtime = -1
	}
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

// windowAggregate plans the WindowAggregate w over w.Input (the Calc
// computing the keys, the aggregates' arguments and, last, the rowtime or
// an attached window's bounds) and the Calc of HAVING and the select list
// over its output.
func (p *Planner) windowAggregate(w *WindowAggregate, scope expr.Tables, s *ast.Select, aggs []*ast.Call,
	refs []argRef, groups []ast.Expr, winRole []int, post []ast.Expr, having ast.Expr, names []string) (Node, error) {
	in := w.Input
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
	if w.Window.ProcTime {
		w.rowtime = -1
	}
	for i := range groups {
		if r := winRole[i]; r >= 0 {
			cols["$g"+strconv.Itoa(i)] = expr.Column{Index: base + r, Type: wf[r].Type}
		}
	}
	return p.postCalc(w, w.fields, len(w.Keys), cols, scope, having, post, names)
}

// sessionKeysMatch reports whether a window aggregation over tvf groups
// by exactly its session keys: for SESSION, the keys besides the window
// columns must be the PARTITION BY columns (Flink's rule); the windows of
// the other TVFs do not depend on keys.
func sessionKeysMatch(tvf *WindowTableFunction, groups []ast.Expr, relName string) bool {
	if tvf.Window.Kind != Session {
		return true
	}
	keys := map[string]bool{}
	for _, g := range groups {
		r, ok := g.(*ast.ColumnRef)
		if !ok || len(r.Parts) > 2 || len(r.Parts) == 2 && r.Parts[0] != relName {
			return false
		}
		if name := r.Parts[len(r.Parts)-1]; !isWindowColumn(name) {
			keys[name] = true
		}
	}
	if len(keys) != len(tvf.Window.Partition) {
		return false
	}
	for _, c := range tvf.Window.Partition {
		if !keys[c] {
			return false
		}
	}
	return true
}

// groupWindowFuncs are the group window functions of GROUP BY (Flink's
// legacy group window aggregation) and their parameters after the time
// attribute.
var groupWindowFuncs = map[string][]string{
	"TUMBLE":  {"SIZE"},
	"HOP":     {"SLIDE", "SIZE"},
	"SESSION": {"GAP"},
}

// groupWindow rewrites a group window aggregation, GROUP BY k,
// TUMBLE(ts, size) with TUMBLE_START(ts, size) in the select list (HOP and
// SESSION alike), into the window TVF form the rest of the planner knows:
// the call becomes GROUP BY window_start, window_end and the auxiliary
// functions become window_start, window_end and window_time. It returns
// the window (never run) or nil when s has no group window.
func (p *Planner) groupWindow(rel relation, s *ast.Select, exprs []ast.Expr) (*ast.Select, []ast.Expr, *WindowTableFunction, error) {
	var call *ast.Call
	at := -1
	for i, g := range s.GroupBy {
		c, ok := g.(*ast.Call)
		if !ok || c.Over != nil || len(c.Name.Parts) != 1 || groupWindowFuncs[strings.ToUpper(c.Name.Last())] == nil {
			continue
		}
		if call != nil {
			return nil, nil, nil, errorf(c.Pos, "a GROUP BY takes one group window function, found %s and %s", strings.ToUpper(call.Name.Last()), strings.ToUpper(c.Name.Last()))
		}
		call, at = c, i
	}
	if call == nil {
		return s, exprs, nil, nil
	}
	fname := strings.ToUpper(call.Name.Last())
	if _, ok := rel.node.(*WindowTableFunction); ok {
		return nil, nil, nil, errorf(call.Pos, "the group window function %s cannot group a window table function's rows", fname)
	}
	params := groupWindowFuncs[fname]
	if len(call.Args) != len(params)+1 {
		return nil, nil, nil, errorf(call.Pos, "the group window function %s takes %d arguments (the time attribute, %s), got %d", fname, len(params)+1, strings.Join(params, ", "), len(call.Args))
	}
	if rel.node.Updating() {
		return nil, nil, nil, errorf(call.Pos, "GroupWindowAggregate doesn't support consuming update changes which is produced by node %s", describe(origin(rel.node)))
	}
	ref, ok := call.Args[0].(*ast.ColumnRef)
	if !ok {
		return nil, nil, nil, errorf(call.Args[0].Position(), "the first argument of %s must be a time attribute column, not %s", fname, call.Args[0])
	}
	col, err := rel.scope().Resolve(ref)
	if err != nil {
		return nil, nil, nil, err
	}
	fields := rel.node.Fields()
	if col.Index != rel.node.Rowtime() {
		return nil, nil, nil, errorf(ref.Pos, "window %s requires a time attribute, but '%s' is %s; declare a WATERMARK for it (processing-time windows are not supported)", fname, strings.Join(ref.Parts, "."), fields[col.Index].Type)
	}
	w := WindowSpec{Kind: WindowKind(fname), TimeCol: fields[col.Index].Name}
	vals := map[string]int64{}
	for i, prm := range params {
		if vals[prm], err = p.windowInterval(call.Args[i+1], fname, prm); err != nil {
			return nil, nil, nil, err
		}
	}
	w.Size, w.Slide, w.Gap = vals["SIZE"], vals["SLIDE"], vals["GAP"]
	if w.Kind == Hop && w.Size%w.Slide != 0 {
		return nil, nil, nil, errorf(call.Args[2].Position(), "HOP window size must be an integral multiple of its slide, but got size %d ms and slide %d ms", w.Size, w.Slide)
	}
	tvf := &WindowTableFunction{Input: rel.node, Window: w, TimeCol: col.Index, timeRef: ref}
	tvf.fields = append(slices.Clone(fields), windowFields(fields[col.Index].Type)...)
	tvf.rowtime = len(tvf.fields) - 1

	out := *s
	out.GroupBy = slices.Clone(s.GroupBy)
	out.GroupBy[at] = &ast.ColumnRef{Pos: call.Pos, Parts: []string{windowStart}}
	// window_time too: TUMBLE_ROWTIME may select it, and it follows from
	// window_end.
	out.GroupBy = append(out.GroupBy, &ast.ColumnRef{Pos: call.Pos, Parts: []string{windowEnd}}, &ast.ColumnRef{Pos: call.Pos, Parts: []string{windowTime}})
	aux := func(e ast.Expr) (ast.Expr, bool, error) {
		c, ok := e.(*ast.Call)
		if !ok || c.Over != nil || len(c.Name.Parts) != 1 {
			return nil, false, nil
		}
		name := strings.ToUpper(c.Name.Last())
		kind, prop, ok := strings.Cut(name, "_")
		if !ok || groupWindowFuncs[kind] == nil {
			return nil, false, nil
		}
		var colName string
		switch prop {
		case "START":
			colName = windowStart
		case "END":
			colName = windowEnd
		case "ROWTIME":
			colName = windowTime
		case "PROCTIME":
			return nil, false, errorf(c.Pos, "%s is not supported: processing-time windows are not supported", name)
		default:
			return nil, false, nil
		}
		if kind != fname || len(c.Args) != len(call.Args) || !slices.EqualFunc(c.Args, call.Args, func(a, b ast.Expr) bool { return ast.Equal(a, b) }) {
			return nil, false, errorf(c.Pos, "%s must name the group window of the GROUP BY, %s", name, call)
		}
		return &ast.ColumnRef{Pos: c.Pos, Parts: []string{colName}}, true, nil
	}
	outExprs := make([]ast.Expr, len(exprs))
	for i, e := range exprs {
		if outExprs[i], err = rewrite(e, aux); err != nil {
			return nil, nil, nil, err
		}
	}
	if s.Having != nil {
		if out.Having, err = rewrite(s.Having, aux); err != nil {
			return nil, nil, nil, err
		}
	}
	return &out, outExprs, tvf, nil
}
