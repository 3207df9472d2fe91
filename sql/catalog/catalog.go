// Package catalog holds the tables, views and connectors a SQL script
// defines and uses: CREATE TABLE and CREATE VIEW put them here, the
// planner reads them.
//
// A table keeps its columns (physical and computed, with types from
// sql/types), its watermark, its primary key and its WITH options. The
// catalog checks what can be checked without a query: the connector
// exists, every option is one the connector knows, and the sink
// guarantees of the spec (`delivery_guarantee = 'exactly_once'` only for
// a connector with two-phase commit, `mode = 'upsert'` only with a
// PRIMARY KEY, the two not together). Rules that need the query (an
// updating query into an append-only sink, the key an upsert query
// projects) are the planner's.
//
// Connectors are described, not implemented, here: a Connector says what
// a connector can do (read, write, consume updates, commit in two
// phases) and which options it takes. The SQL executor owns the code that
// builds their sources and sinks.
//
// Names are case-sensitive, as in Flink; a qualified name
// (`cat.db.t`) is accepted and only its last part is used, since clink
// has one catalog and one database.
//
// Callers' duties:
//
//  1. Register every connector before the first CreateTable.
//  2. Run the statements of a script in order; the catalog is not safe for
//     concurrent use.
package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/clinkstream/clink/sql/ast"
	"github.com/clinkstream/clink/sql/expr"
	"github.com/clinkstream/clink/sql/types"
)

// Column is one column of a table.
type Column struct {
	Name string
	Type types.Type
	Pos  ast.Pos
	// Computed is the expression of a computed column (`c AS expr`), nil
	// for a physical column. Computed columns are read, never written;
	// their expressions read physical columns only, and Type is the
	// expression's type.
	Computed ast.Expr
}

// Watermark is a table's `WATERMARK FOR column AS expr`.
type Watermark struct {
	Pos ast.Pos
	// Column is the index of the rowtime column in Table.Columns.
	Column int
	Expr   ast.Expr
	// DelayMs is the bound of the out-of-orderness: the watermark is the
	// highest rowtime seen minus DelayMs.
	DelayMs int64
}

// Table is a table created by CREATE TABLE.
type Table struct {
	Name       string
	Pos        ast.Pos
	Columns    []Column
	Watermark  *Watermark
	PrimaryKey []string
	// Options are the WITH options, keys as written (quoted or bare).
	Options   map[string]string
	OptionPos map[string]ast.Pos
	Connector *Connector
	// Guarantee is the sink's delivery guarantee: "exactly_once",
	// "at_least_once" (the default) or "none".
	Guarantee string
	// Upsert marks a sink written with `mode = 'upsert'`.
	Upsert bool
}

// Physical returns the physical columns, in order: what a source reads and
// a sink writes.
func (t *Table) Physical() []Column {
	var cs []Column
	for _, c := range t.Columns {
		if c.Computed == nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// OptionPosition returns where option key was written, or the table's
// position.
func (t *Table) OptionPosition(key string) ast.Pos {
	if p, ok := t.OptionPos[key]; ok {
		return p
	}
	return t.Pos
}

// View is a view created by CREATE VIEW.
type View struct {
	Name  string
	Pos   ast.Pos
	Query *ast.Query
	// Columns are the view's column names (the list of CREATE VIEW, or the
	// query's), filled in by the planner when it validated the query.
	Columns []types.Field
}

// Connector describes what a connector can do and which options it takes.
type Connector struct {
	// Name is the value of the 'connector' option.
	Name string
	// Source and Sink say whether a table of this connector can be read
	// and written.
	Source, Sink bool
	// Updates says whether the sink consumes updating input (-U, +U, -D)
	// without `mode = 'upsert'`; otherwise it is append-only.
	Updates bool
	// Upsert says whether the sink can run in `mode = 'upsert'`.
	Upsert bool
	// TwoPhaseCommit says whether the sink can deliver exactly once
	// (`delivery_guarantee = 'exactly_once'`) by two-phase commit.
	TwoPhaseCommit bool
	// Options are the option keys the connector takes besides
	// 'connector' and the sink guarantee keys, with a line of help each.
	Options map[string]string
	// ValidKey accepts option keys beyond Options (per-field keys such as
	// fields.<f>.kind); nil accepts none.
	ValidKey func(key string, t *Table) bool
	// Validate checks the options' values once the table is built; nil
	// checks nothing. Errors should name the option.
	Validate func(t *Table) error
}

// Catalog holds one script's tables, views and connectors.
type Catalog struct {
	// Compiler types computed columns and watermarks with the session's
	// settings (time zone, functions).
	Compiler   *expr.Compiler
	connectors map[string]*Connector
	tables     map[string]*Table
	views      map[string]*View
}

// New returns a catalog that knows the given connectors.
func New(connectors ...*Connector) *Catalog {
	c := &Catalog{Compiler: &expr.Compiler{}, connectors: map[string]*Connector{}, tables: map[string]*Table{}, views: map[string]*View{}}
	for _, conn := range connectors {
		c.connectors[conn.Name] = conn
	}
	return c
}

// Connector returns the connector named name.
func (c *Catalog) Connector(name string) (*Connector, bool) {
	conn, ok := c.connectors[name]
	return conn, ok
}

// ConnectorNames returns the registered connectors' names, sorted.
func (c *Catalog) ConnectorNames() []string {
	var names []string
	for n := range c.connectors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Error is an error about a statement at a place in the script.
type Error = types.Error

func errorf(pos ast.Pos, format string, args ...any) error {
	return &types.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Guarantee option keys: the spec's, and Flink's spelling.
var guaranteeKeys = []string{"delivery_guarantee", "sink.delivery-guarantee"}

// CreateTable adds the table of a CREATE TABLE statement.
func (c *Catalog) CreateTable(ct *ast.CreateTable) error {
	name := ct.Name.Last()
	if c.exists(name) {
		if ct.IfNotExists {
			return nil
		}
		return errorf(ct.Name.Pos, "table or view '%s' already exists", name)
	}
	if ct.AsQuery != nil {
		return errorf(ct.Pos, "CREATE TABLE ... AS SELECT is not supported yet; create the table, then INSERT INTO it")
	}
	t := &Table{Name: name, Pos: ct.Name.Pos, Options: map[string]string{}, OptionPos: map[string]ast.Pos{}, Guarantee: "at_least_once"}
	seen := map[string]bool{}
	for _, cd := range ct.Columns {
		if seen[cd.Name.Name] {
			return errorf(cd.Name.Pos, "column '%s' is defined twice in table '%s'", cd.Name.Name, name)
		}
		seen[cd.Name.Name] = true
		col := Column{Name: cd.Name.Name, Pos: cd.Name.Pos}
		switch cd.Kind {
		case ast.PhysicalColumn:
			typ, err := types.FromAST(cd.Type)
			if err != nil {
				return err
			}
			col.Type = typ
		case ast.ComputedColumn:
			// The planner types it: computing a column needs the expression
			// compiler over the physical columns.
			col.Computed = cd.Expr
		default:
			return errorf(cd.Pos, "metadata column '%s' is not supported yet", cd.Name.Name)
		}
		t.Columns = append(t.Columns, col)
	}
	physical := expr.NewTable(name, fieldsOf(t.Physical())...)
	for i := range t.Columns {
		col := &t.Columns[i]
		if col.Computed == nil {
			continue
		}
		ce, err := c.Compiler.Compile(col.Computed, physical)
		if err != nil {
			return fmt.Errorf("computed column '%s': %w", col.Name, err)
		}
		col.Type = ce.Type
	}
	if wm := ct.Watermark; wm != nil {
		if len(wm.Column) != 1 {
			return errorf(wm.Pos, "watermark on nested column '%s' is not supported", strings.Join(wm.Column, "."))
		}
		i := t.columnIndex(wm.Column[0])
		if i < 0 {
			return errorf(wm.Pos, "the rowtime column '%s' of the WATERMARK is not a column of table '%s'", wm.Column[0], name)
		}
		rt := t.Columns[i]
		if rt.Type.Kind != types.KindTimestamp && rt.Type.Kind != types.KindTimestampLTZ || rt.Type.Precision > 3 {
			return errorf(wm.Pos, "the rowtime column '%s' of table '%s' must be TIMESTAMP(3) or TIMESTAMP_LTZ(3), not %s", rt.Name, name, rt.Type)
		}
		delay, err := watermarkDelay(wm.Expr, rt.Name)
		if err != nil {
			return err
		}
		t.Watermark = &Watermark{Pos: wm.Pos, Column: i, Expr: wm.Expr, DelayMs: delay}
	}
	if pk := ct.PrimaryKey; pk != nil {
		for _, id := range pk.Columns {
			i := t.columnIndex(id.Name)
			if i < 0 {
				return errorf(id.Pos, "primary key column '%s' is not a column of table '%s'", id.Name, name)
			}
			if t.Columns[i].Computed != nil {
				return errorf(id.Pos, "primary key column '%s' must be a physical column", id.Name)
			}
			t.PrimaryKey = append(t.PrimaryKey, id.Name)
		}
	}
	for _, o := range ct.Options {
		t.Options[o.Key] = o.Value
		t.OptionPos[o.Key] = o.Pos
	}
	if err := c.bindConnector(t, ct.Pos); err != nil {
		return err
	}
	c.tables[name] = t
	return nil
}

func (t *Table) columnIndex(name string) int {
	return slices.IndexFunc(t.Columns, func(c Column) bool { return c.Name == name })
}

// ColumnIndex returns the index of the named column, or -1.
func (t *Table) ColumnIndex(name string) int { return t.columnIndex(name) }

func (c *Catalog) bindConnector(t *Table, pos ast.Pos) error {
	name, ok := t.Options["connector"]
	if !ok {
		return errorf(pos, "table '%s' has no 'connector' option; known connectors: %s", t.Name, strings.Join(c.ConnectorNames(), ", "))
	}
	conn, ok := c.connectors[name]
	if !ok {
		return errorf(t.OptionPosition("connector"), "unknown connector '%s' in table '%s'; known connectors: %s", name, t.Name, strings.Join(c.ConnectorNames(), ", "))
	}
	t.Connector = conn
	var guaranteeKey string
	keys := make([]string, 0, len(t.Options))
	for k := range t.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := t.Options[k]
		switch {
		case k == "connector":
		case slices.Contains(guaranteeKeys, k) && conn.Sink:
			if guaranteeKey != "" {
				return errorf(t.OptionPosition(k), "options '%s' and '%s' both set the delivery guarantee; use one", guaranteeKey, k)
			}
			guaranteeKey = k
			switch strings.ToLower(v) {
			case "exactly_once", "exactly-once":
				if !conn.TwoPhaseCommit {
					return errorf(t.OptionPosition(k), "connector '%s' cannot deliver exactly once: it has no two-phase commit; use '%s' = 'at_least_once'", name, k)
				}
				t.Guarantee = "exactly_once"
			case "at_least_once", "at-least-once":
				t.Guarantee = "at_least_once"
			case "none":
				t.Guarantee = "none"
			default:
				return errorf(t.OptionPosition(k), "option '%s' must be 'exactly_once', 'at_least_once' or 'none', got '%s'", k, v)
			}
		case k == "mode" && conn.Sink && !hasOption(conn, "mode"):
			switch strings.ToLower(v) {
			case "upsert":
				if !conn.Upsert {
					return errorf(t.OptionPosition(k), "connector '%s' has no upsert mode", name)
				}
				t.Upsert = true
			case "append", "insert":
			default:
				return errorf(t.OptionPosition(k), "option 'mode' must be 'upsert' or 'append', got '%s'", v)
			}
		case hasOption(conn, k) || conn.ValidKey != nil && conn.ValidKey(k, t):
		default:
			return errorf(t.OptionPosition(k), "unsupported option '%s' for connector '%s'%s", k, name, supported(conn, t))
		}
	}
	if t.Upsert {
		if len(t.PrimaryKey) == 0 {
			return errorf(t.OptionPosition("mode"), "table '%s' has 'mode' = 'upsert' but no PRIMARY KEY; an upsert sink needs PRIMARY KEY (...) NOT ENFORCED", t.Name)
		}
		if t.Guarantee == "exactly_once" {
			return errorf(t.OptionPosition(guaranteeKey), "table '%s': 'mode' = 'upsert' and '%s' = 'exactly_once' exclude each other: an upsert sink converges by key, it does not commit in two phases", t.Name, guaranteeKey)
		}
	}
	if conn.Validate != nil {
		if err := conn.Validate(t); err != nil {
			return err
		}
	}
	return nil
}

func hasOption(conn *Connector, k string) bool { _, ok := conn.Options[k]; return ok }

func supported(conn *Connector, t *Table) string {
	var ks []string
	for k := range conn.Options {
		ks = append(ks, k)
	}
	if conn.Sink {
		ks = append(ks, guaranteeKeys[0])
		if conn.Upsert {
			ks = append(ks, "mode")
		}
	}
	if len(ks) == 0 {
		return "; it takes no options"
	}
	sort.Strings(ks)
	return "; supported options: " + strings.Join(ks, ", ")
}

// CreateView adds a view whose query the planner has validated.
func (c *Catalog) CreateView(cv *ast.CreateView, columns []types.Field) error {
	name := cv.Name.Last()
	if c.exists(name) {
		if cv.IfNotExists {
			return nil
		}
		return errorf(cv.Name.Pos, "table or view '%s' already exists", name)
	}
	c.views[name] = &View{Name: name, Pos: cv.Name.Pos, Query: cv.Query, Columns: columns}
	return nil
}

// Drop removes a table or view.
func (c *Catalog) Drop(d *ast.Drop) error {
	name := d.Name.Last()
	switch d.Object {
	case "TABLE":
		if _, ok := c.tables[name]; ok {
			delete(c.tables, name)
			return nil
		}
	case "VIEW":
		if _, ok := c.views[name]; ok {
			delete(c.views, name)
			return nil
		}
	default:
		return errorf(d.Pos, "DROP %s is not supported", d.Object)
	}
	if d.IfExists {
		return nil
	}
	return errorf(d.Name.Pos, "%s '%s' does not exist", strings.ToLower(d.Object), name)
}

func (c *Catalog) exists(name string) bool {
	_, t := c.tables[name]
	_, v := c.views[name]
	return t || v
}

// Lookup finds the table or view a name refers to; exactly one of the
// results is non-nil when err is nil.
func (c *Catalog) Lookup(name *ast.ObjectName) (*Table, *View, error) {
	n := name.Last()
	if t, ok := c.tables[n]; ok {
		return t, nil, nil
	}
	if v, ok := c.views[n]; ok {
		return nil, v, nil
	}
	var all []string
	for k := range c.tables {
		all = append(all, k)
	}
	for k := range c.views {
		all = append(all, k)
	}
	sort.Strings(all)
	hint := ""
	for _, k := range all {
		if strings.EqualFold(k, n) {
			hint = fmt.Sprintf("; did you mean '%s'? (names are case-sensitive)", k)
		}
	}
	if hint == "" && len(all) > 0 {
		hint = "; known tables and views: " + strings.Join(all, ", ")
	}
	return nil, nil, errorf(name.Pos, "object '%s' not found%s", n, hint)
}

func fieldsOf(cs []Column) []types.Field {
	fs := make([]types.Field, len(cs))
	for i, c := range cs {
		fs[i] = types.Field{Name: c.Name, Type: c.Type}
	}
	return fs
}

// watermarkDelay reads the bounded-out-of-orderness strategies Flink
// documents: `ts` and `ts - INTERVAL 'n' unit`.
func watermarkDelay(e ast.Expr, col string) (int64, error) {
	isCol := func(e ast.Expr) bool {
		r, ok := e.(*ast.ColumnRef)
		return ok && len(r.Parts) == 1 && r.Parts[0] == col
	}
	if isCol(e) {
		return 0, nil
	}
	if b, ok := e.(*ast.Binary); ok && b.Op == ast.OpSub && isCol(b.L) {
		if lit, ok := b.R.(*ast.IntervalLit); ok {
			c, err := expr.Compile(lit, expr.Tables{})
			if err == nil && c.Type.Kind == types.KindIntervalDayTime {
				v, err := c.Eval(nil)
				if err == nil && v.Int64() >= 0 {
					return v.Int64(), nil
				}
			}
		}
	}
	return 0, errorf(e.Position(), "watermark expression '%s' is not supported; use `%s` or `%s - INTERVAL 'n' SECOND` (bounded out-of-orderness)", e, col, col)
}
