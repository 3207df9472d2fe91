package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
)

// ModeUpsert is the value of the SQL sink option mode that selects the
// upsert sink.
const ModeUpsert = "upsert"

// DefaultMaxBufferedKeys is how many distinct keys an upsert writer holds
// before it flushes between barriers, unless the configuration says
// otherwise.
const DefaultMaxBufferedKeys = 10_000

// UpsertConfig configures an UpsertSink.
type UpsertConfig[T any] struct {
	// URL is the server's connection string, as pgx takes it.
	URL string
	// Table is the table, optionally qualified by its schema. It must
	// exist, with a primary key or unique constraint on exactly Key.
	Table string
	// Columns are the table's columns that Row fills, in that order.
	Columns []string
	// Key are the primary key's columns; each must be among Columns.
	Key []string
	// Row returns the change a record carries and its column values, in
	// the order of Columns. +I and +U write the row; -D deletes the row
	// of its key, and so does -U unless a +I or +U of the key follows
	// before the next flush. For -U and -D only the key's values matter.
	// The sink holds the slice until the next flush, so each call must
	// return a new one.
	Row func(v T) (connector.RowKind, []any)
	// MaxBufferedKeys makes a writer flush early when it buffers this
	// many distinct keys (default DefaultMaxBufferedKeys).
	MaxBufferedKeys int
	// Timeout bounds each flush (default DefaultTimeout).
	Timeout time.Duration
}

// Validate checks the configuration and fills in defaults.
func (c *UpsertConfig[T]) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("postgres upsert sink for table %s: no connection URL given", c.Table)
	}
	if _, err := parseTable(c.Table); err != nil {
		return fmt.Errorf("postgres upsert sink: %w", err)
	}
	if err := checkColumns(c.Table, c.Columns); err != nil {
		return fmt.Errorf("postgres upsert sink: %w", err)
	}
	if len(c.Key) == 0 {
		return fmt.Errorf("postgres upsert sink for table %s: mode %s needs key columns (the table's primary key)", c.Table, ModeUpsert)
	}
	if err := checkColumns(c.Table, c.Key); err != nil {
		return fmt.Errorf("postgres upsert sink: key: %w", err)
	}
	for _, k := range c.Key {
		if !slices.Contains(c.Columns, k) {
			return fmt.Errorf("postgres upsert sink for table %s: key column %q is not among the columns %v", c.Table, k, c.Columns)
		}
	}
	if c.Row == nil {
		return fmt.Errorf("postgres upsert sink for table %s: no Row function given", c.Table)
	}
	if c.MaxBufferedKeys < 0 || c.Timeout < 0 {
		return fmt.Errorf("postgres upsert sink for table %s: negative MaxBufferedKeys or Timeout", c.Table)
	}
	if c.MaxBufferedKeys == 0 {
		c.MaxBufferedKeys = DefaultMaxBufferedKeys
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if _, err := pgx.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("postgres upsert sink for table %s: parsing the connection URL: %w", c.Table, err)
	}
	return nil
}

// UpsertSink keeps a table equal to a changelog's current rows by primary
// key: a clink.Sink whose writers buffer changes, net them by key, and
// apply them in one transaction at every checkpoint barrier (and at
// close). It is effectively-once, not exactly-once: a restored job applies
// some changes again, and because every statement is keyed and idempotent
// the table converges to the same final state, provided the job is
// deterministic and each key's changes come from one subtask (key the
// stream by the table's key before the sink).
type UpsertSink[T any] struct {
	cfg    UpsertConfig[T]
	ident  pgx.Identifier
	keyIdx []int
	upsert string // INSERT ... ON CONFLICT statement of one row
	delete string // DELETE statement of one key
}

// NewUpsertSink validates cfg and returns the sink.
func NewUpsertSink[T any](cfg UpsertConfig[T]) (*UpsertSink[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ident, _ := parseTable(cfg.Table)
	s := &UpsertSink[T]{cfg: cfg, ident: ident}
	cols := quoteColumns(cfg.Columns)
	keys := quoteColumns(cfg.Key)
	params := make([]string, len(cols))
	for i := range cols {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	var set []string
	for i, c := range cfg.Columns {
		if !slices.Contains(cfg.Key, c) {
			set = append(set, cols[i]+" = EXCLUDED."+cols[i])
		}
	}
	action := "DO NOTHING"
	if len(set) > 0 {
		action = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	s.upsert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) %s",
		ident.Sanitize(), strings.Join(cols, ", "), strings.Join(params, ", "), strings.Join(keys, ", "), action)
	var where []string
	for i, k := range cfg.Key {
		s.keyIdx = append(s.keyIdx, slices.Index(cfg.Columns, k))
		where = append(where, keys[i]+" = $"+strconv.Itoa(i+1))
	}
	s.delete = fmt.Sprintf("DELETE FROM %s WHERE %s", ident.Sanitize(), strings.Join(where, " AND "))
	return s, nil
}

// Open connects one subtask's writer.
func (s *UpsertSink[T]) Open(ctx clink.SinkContext) (clink.SinkWriter[T], error) {
	conn, err := connect(s.cfg.URL, s.cfg.Table, s.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	kinds, err := s.keyKinds(conn)
	if err != nil {
		closeConn(conn)
		return nil, err
	}
	return &UpsertWriter[T]{sink: s, conn: conn, subtask: ctx.Subtask, byKey: map[string]int{}, keyKinds: kinds}, nil
}

// change is the netted change of one key: the last row written for it,
// or its deletion.
type change struct {
	del    bool
	values []any
}

// UpsertWriter is one subtask's writer of an UpsertSink, a
// clink.FlushingWriter. One goroutine uses it.
type UpsertWriter[T any] struct {
	sink    *UpsertSink[T]
	conn    *pgx.Conn
	subtask int
	byKey   map[string]int // encoded key -> index in changes
	// keyKinds says how each key column compares times.
	keyKinds []keyKind
	changes  []change
	keyBuf   []byte
}

// Write nets the change of v into the buffer and flushes when the buffer
// holds MaxBufferedKeys keys.
func (w *UpsertWriter[T]) Write(v T) error {
	cfg := &w.sink.cfg
	kind, vals := cfg.Row(v)
	if len(vals) != len(cfg.Columns) {
		return fmt.Errorf("table %s: Row returned %d values for %d columns", cfg.Table, len(vals), len(cfg.Columns))
	}
	var del bool
	switch kind {
	case connector.Insert, connector.UpdateAfter:
	case connector.UpdateBefore, connector.Delete:
		del = true
	default:
		return fmt.Errorf("table %s: a row of unknown kind %v", cfg.Table, kind)
	}
	w.keyBuf = w.keyBuf[:0]
	for i, idx := range w.sink.keyIdx {
		if vals[idx] == nil {
			return fmt.Errorf("table %s: %v row with a NULL in key column %s", cfg.Table, kind, cfg.Key[i])
		}
		var err error
		if w.keyBuf, err = appendKey(w.keyBuf, w.keyKinds[i], vals[idx]); err != nil {
			return fmt.Errorf("table %s: %v row: key column %s: %w", cfg.Table, kind, cfg.Key[i], err)
		}
	}
	if i, ok := w.byKey[string(w.keyBuf)]; ok {
		w.changes[i] = change{del: del, values: vals}
		return nil
	}
	w.byKey[string(w.keyBuf)] = len(w.changes)
	w.changes = append(w.changes, change{del: del, values: vals})
	if len(w.changes) >= cfg.MaxBufferedKeys {
		return w.flush()
	}
	return nil
}

// keyKind says how a key column compares time.Time values, as pgx sends
// them: a timestamptz column compares instants, a timestamp column the
// wall clock (pgx drops the zone), a date column the wall clock's date.
type keyKind uint8

const (
	keyInstant keyKind = iota
	keyWallClock
	keyDate
)

// appendKey appends an encoding of one key value under which two values
// are equal when the server takes them as equal: integers of any width
// alike, time.Time by instant (or wall clock, or date; see keyKind) to the
// microsecond the server keeps, floats with -0 as 0. It refuses values
// that have no such encoding: pointers and other reference types, whose
// formatted form is an address, and NaN.
func appendKey(b []byte, kind keyKind, v any) ([]byte, error) {
	switch x := v.(type) {
	case string:
		b = appendLenPrefixed(b, 's', x)
	case []byte:
		b = appendLenPrefixed(b, 'b', string(x))
	case bool:
		b = append(b, 't')
		b = strconv.AppendBool(b, x)
	case int:
		b = appendInt(b, int64(x))
	case int8:
		b = appendInt(b, int64(x))
	case int16:
		b = appendInt(b, int64(x))
	case int32:
		b = appendInt(b, int64(x))
	case int64:
		b = appendInt(b, x)
	case uint:
		b = appendUint(b, uint64(x))
	case uint8:
		b = appendUint(b, uint64(x))
	case uint16:
		b = appendUint(b, uint64(x))
	case uint32:
		b = appendUint(b, uint64(x))
	case uint64:
		b = appendUint(b, x)
	case float32:
		if x != x {
			return b, errors.New("a float NaN cannot be a key")
		}
		if x == 0 {
			x = 0 // -0 = 0 on the server
		}
		b = append(b, 'f')
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	case float64:
		if math.IsNaN(x) {
			return b, errors.New("a float NaN cannot be a key")
		}
		if x == 0 {
			x = 0
		}
		b = append(b, 'd')
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	case time.Time:
		b = appendTime(b, kind, x)
	default:
		switch k := reflect.TypeOf(v).Kind(); k {
		case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			what := map[reflect.Kind]string{reflect.Pointer: "pointer", reflect.Interface: "interface", reflect.Map: "map",
				reflect.Slice: "slice", reflect.Chan: "channel", reflect.Func: "function", reflect.UnsafePointer: "pointer"}[k]
			return b, fmt.Errorf("a value of type %T (a %s) cannot be a key: equal keys could encode differently; pass the value itself", v, what)
		}
		s := fmt.Sprintf("%T:%v", v, v)
		b = appendLenPrefixed(b, 'o', s)
	}
	return append(b, 0), nil
}

func appendLenPrefixed(b []byte, tag byte, s string) []byte {
	b = append(b, tag)
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func appendInt(b []byte, x int64) []byte {
	return strconv.AppendInt(append(b, 'i'), x, 10)
}

func appendUint(b []byte, x uint64) []byte {
	return strconv.AppendUint(append(b, 'i'), x, 10)
}

// appendTime encodes t as pgx sends it for a column of kind: microseconds
// since the epoch of the instant or of the wall clock, or the wall clock's
// date. The monotonic reading and the zone do not matter.
func appendTime(b []byte, kind keyKind, t time.Time) []byte {
	switch kind {
	case keyWallClock:
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	case keyDate:
		y, m, d := t.Date()
		b = append(b, 'D')
		b = strconv.AppendInt(b, int64(y), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(m), 10)
		b = append(b, '-')
		return strconv.AppendInt(b, int64(d), 10)
	}
	b = append(b, 'T')
	return strconv.AppendInt(b, t.Unix()*1_000_000+int64(t.Nanosecond())/1000, 10)
}

// keyKinds reads the types of the key columns: time.Time keys of timestamp
// and date columns compare by wall clock. A table the server does not know
// (yet) gets the default, comparing instants; its flush will fail anyway.
func (s *UpsertSink[T]) keyKinds(conn *pgx.Conn) ([]keyKind, error) {
	kinds := make([]keyKind, len(s.cfg.Key))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY($2)`,
		s.ident.Sanitize(), s.cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("table %s: reading the key columns' types: %w", s.cfg.Table, err)
	}
	types := map[string]string{}
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { types[name] = typ; return nil }); err != nil {
		return nil, fmt.Errorf("table %s: reading the key columns' types: %w", s.cfg.Table, err)
	}
	for i, k := range s.cfg.Key {
		switch types[k] {
		case "timestamp":
			kinds[i] = keyWallClock
		case "date":
			kinds[i] = keyDate
		}
	}
	return kinds, nil
}

// Flush applies the buffered changes in one transaction: an upsert for
// each key whose last change writes a row, a delete for each other key.
// The runtime calls it at every checkpoint barrier.
func (w *UpsertWriter[T]) Flush() error { return w.flush() }

func (w *UpsertWriter[T]) flush() error {
	if len(w.changes) == 0 {
		return nil
	}
	cfg := &w.sink.cfg
	if w.conn == nil {
		return fmt.Errorf("table %s: the upsert writer is closed", cfg.Table)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	b := &pgx.Batch{}
	upserts, deletes := 0, 0
	for _, c := range w.changes {
		if c.del {
			key := make([]any, len(w.sink.keyIdx))
			for i, idx := range w.sink.keyIdx {
				key[i] = c.values[idx]
			}
			b.Queue(w.sink.delete, key...)
			deletes++
		} else {
			b.Queue(w.sink.upsert, c.values...)
			upserts++
		}
	}
	err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("table %s: applying %d upserts and %d deletes: %w", cfg.Table, upserts, deletes, err)
	}
	clear(w.byKey)
	clear(w.changes)
	w.changes = w.changes[:0]
	return nil
}

// Close flushes what is buffered and closes the connection.
func (w *UpsertWriter[T]) Close() error {
	if w.conn == nil {
		return nil
	}
	err := w.flush()
	if cerr := closeConn(w.conn); cerr != nil && err == nil {
		err = fmt.Errorf("table %s: closing the connection: %w", w.sink.cfg.Table, cerr)
	}
	w.conn = nil
	return err
}

var _ clink.FlushingWriter[int] = (*UpsertWriter[int])(nil)
