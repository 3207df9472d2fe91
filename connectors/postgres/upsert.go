package postgres

import (
	"context"
	"fmt"
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
	s := &UpsertSink[T]{cfg: cfg}
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
	return &UpsertWriter[T]{sink: s, conn: conn, subtask: ctx.Subtask, byKey: map[string]int{}}, nil
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
	changes []change
	keyBuf  []byte
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
		w.keyBuf = appendKey(w.keyBuf, vals[idx])
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

// appendKey appends an encoding of one key value that tells values of
// different types and values apart.
func appendKey(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		b = append(b, 's')
		b = strconv.AppendInt(b, int64(len(x)), 10)
		b = append(b, ':')
		b = append(b, x...)
	case int64:
		b = append(b, 'i')
		b = strconv.AppendInt(b, x, 10)
	case int:
		b = append(b, 'i')
		b = strconv.AppendInt(b, int64(x), 10)
	case int32:
		b = append(b, 'i')
		b = strconv.AppendInt(b, int64(x), 10)
	default:
		s := fmt.Sprintf("%T:%v", v, v)
		b = append(b, 'o')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	return append(b, 0)
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
