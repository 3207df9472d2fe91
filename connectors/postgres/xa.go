package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
)

// DefaultBatchRows is how many rows an XASink buffers before it sends them
// to the server with one COPY, unless the configuration says otherwise.
const DefaultBatchRows = 4096

// XAConfig configures an XASink.
type XAConfig[T any] struct {
	// URL is the server's connection string, as pgx takes it
	// ("postgres://user@host:5432/db" or "host=... dbname=...").
	URL string
	// Table is the table rows go to, optionally qualified by its schema
	// ("schema.table"). It must exist.
	Table string
	// Columns are the table's columns that Values fills, in that order.
	Columns []string
	// Values returns the column values of one record, in the order of
	// Columns. The sink holds the slice until the row is sent, so each
	// call must return a new one.
	Values func(v T) []any
	// BatchRows is the number of rows sent per COPY (default
	// DefaultBatchRows).
	BatchRows int
	// Timeout bounds each round of statements (default DefaultTimeout).
	Timeout time.Duration
}

// Validate checks the configuration and fills in defaults.
func (c *XAConfig[T]) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("postgres sink for table %s: no connection URL given", c.Table)
	}
	if _, err := parseTable(c.Table); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	if err := checkColumns(c.Table, c.Columns); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	if c.Values == nil {
		return fmt.Errorf("postgres sink for table %s: no Values function given", c.Table)
	}
	if c.BatchRows < 0 || c.Timeout < 0 {
		return fmt.Errorf("postgres sink for table %s: negative BatchRows or Timeout", c.Table)
	}
	if c.BatchRows == 0 {
		c.BatchRows = DefaultBatchRows
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if _, err := pgx.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("postgres sink for table %s: parsing the connection URL: %w", c.Table, err)
	}
	return nil
}

// Committable is the handle of one prepared transaction: its global
// transaction id, clink_<uid>_g<generation>_sub<subtask>_<checkpoint>.
type Committable struct {
	GID string
}

// XASink is the exactly-once PostgreSQL sink, a connector.CommittingSink.
// A subtask writes a checkpoint interval's rows into one transaction,
// prepares it at the barrier and commits it once the checkpoint is
// durable; a crash leaves at most prepared transactions, which the
// restored job commits (when its checkpoint holds them) or rolls back.
//
// It keeps two connections. The task goroutine alone uses the data
// connection, which holds the open transaction of the current interval.
// Commits and aborts use the control connection, because COMMIT PREPARED
// cannot run inside a transaction block: on a shared connection a commit
// would have to wait for the next barrier, and a Write blocked on a row
// lock held by a prepared transaction could never see it committed. The
// control connection is behind a mutex, since Open and Recover use it on
// the task goroutine and Commit and Abort on the dispatch goroutine.
type XASink[T any] struct {
	connector.StateCodec[Committable]

	cfg   XAConfig[T]
	ident pgx.Identifier
	log   *slog.Logger

	// Set by Open.
	uid          string
	gen, subtask int

	// Owned by the task goroutine.
	data *pgx.Conn
	inTx bool
	rows [][]any

	ctl struct {
		sync.Mutex
		conn *pgx.Conn // nil before Open and after Close
	}
}

// NewXASink validates cfg and returns a sink for one subtask.
func NewXASink[T any](cfg XAConfig[T]) (*XASink[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ident, _ := parseTable(cfg.Table)
	return &XASink[T]{cfg: cfg, ident: ident}, nil
}

// XAFactory validates cfg once and returns a function that makes a sink
// per subtask, the form clink.CommitTo takes.
func XAFactory[T any](cfg XAConfig[T]) (func() connector.CommittingSink[T, Committable], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ident, _ := parseTable(cfg.Table)
	return func() connector.CommittingSink[T, Committable] {
		return &XASink[T]{cfg: cfg, ident: ident}
	}, nil
}

func (s *XASink[T]) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.Timeout)
}

// Open connects, checks that the server allows prepared transactions and
// rolls back the prepared transactions this subtask is responsible for
// that are not among ctx.Pending (see docs/postgres.md).
func (s *XASink[T]) Open(ctx connector.InitContext[Committable]) (err error) {
	s.uid, s.gen, s.subtask = ctx.UID, ctx.Generation, ctx.Subtask
	s.log = ctx.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("channel", "sink.2pc", "sink", ctx.UID, "table", s.cfg.Table)
	if ctx.UID == "" {
		return fmt.Errorf("table %s: the sink has no uid", s.cfg.Table)
	}
	if longest := formatGID(ctx.UID, ctx.Generation, ctx.Subtask, math.MaxUint64); len(longest) > maxGIDLen {
		return fmt.Errorf("table %s: sink uid %q is too long: transaction ids such as %s exceed the server's %d bytes",
			s.cfg.Table, ctx.UID, longest, maxGIDLen)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.data, err = connect(s.cfg.URL, s.cfg.Table, s.cfg.Timeout); err != nil {
		return err
	}
	ctl, err := connect(s.cfg.URL, s.cfg.Table, s.cfg.Timeout)
	if err != nil {
		return err
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.ctl.conn = ctl
	c, cancel := s.ctx()
	defer cancel()
	var setting string
	if err := ctl.QueryRow(c, "SHOW max_prepared_transactions").Scan(&setting); err != nil {
		return fmt.Errorf("table %s: reading max_prepared_transactions: %w", s.cfg.Table, err)
	}
	if err := checkPreparedSetting(s.cfg.Table, setting); err != nil {
		return err
	}
	return s.reconcile(c, ctl, ctx)
}

// reconcile rolls back orphaned prepared transactions: those this subtask
// is responsible for that no restored handle names. They come from
// intervals prepared after the restored checkpoint; left alone they would
// hold their locks and a slot of max_prepared_transactions for ever.
func (s *XASink[T]) reconcile(c context.Context, ctl *pgx.Conn, ctx connector.InitContext[Committable]) error {
	rows, err := ctl.Query(c, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", gidPrefix(ctx.UID))
	if err != nil {
		return fmt.Errorf("table %s: listing prepared transactions: %w", s.cfg.Table, err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("table %s: listing prepared transactions: %w", s.cfg.Table, err)
	}
	pending := make(map[string]bool, len(ctx.Pending))
	for _, p := range ctx.Pending {
		pending[p.GID] = true
	}
	r := responsibility{gen: ctx.Generation, prevGen: ctx.PreviousGeneration, sub: ctx.Subtask, parallelism: ctx.Parallelism, succeeds: ctx.Succeeds}
	rolledBack, kept := 0, 0
	for _, gid := range gids {
		p, ok := parseGID(ctx.UID, gid)
		if !ok || !r.owns(p) {
			continue
		}
		if pending[gid] {
			kept++
			continue
		}
		if _, err := ctl.Exec(c, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil && !isCode(err, codeUndefinedObject) {
			return fmt.Errorf("table %s: rolling back orphaned prepared transaction %s: %w", s.cfg.Table, gid, err)
		}
		rolledBack++
	}
	s.log.Info("reconciled prepared transactions at open", "subtask", ctx.Subtask, "generation", ctx.Generation,
		"rolled_back", rolledBack, "kept", kept)
	return nil
}

// Write buffers the row of v and sends the buffer with COPY, into the
// interval's transaction, when it is full.
func (s *XASink[T]) Write(v T) error {
	vals := s.cfg.Values(v)
	if len(vals) != len(s.cfg.Columns) {
		return fmt.Errorf("table %s: Values returned %d values for %d columns", s.cfg.Table, len(vals), len(s.cfg.Columns))
	}
	s.rows = append(s.rows, vals)
	if len(s.rows) >= s.cfg.BatchRows {
		return s.flush()
	}
	return nil
}

func (s *XASink[T]) flush() error {
	if len(s.rows) == 0 {
		return nil
	}
	if s.data == nil {
		return fmt.Errorf("table %s: the sink is not open", s.cfg.Table)
	}
	c, cancel := s.ctx()
	defer cancel()
	if !s.inTx {
		if _, err := s.data.Exec(c, "BEGIN"); err != nil {
			return fmt.Errorf("table %s: beginning a transaction: %w", s.cfg.Table, err)
		}
		s.inTx = true
	}
	if _, err := s.data.CopyFrom(c, s.ident, s.cfg.Columns, pgx.CopyFromRows(s.rows)); err != nil {
		return fmt.Errorf("table %s: copying %d rows: %w", s.cfg.Table, len(s.rows), err)
	}
	clear(s.rows)
	s.rows = s.rows[:0]
	return nil
}

// PrepareCommit sends the buffered rows and prepares the interval's
// transaction under the gid of this subtask and checkpoint. An interval
// without rows prepares nothing.
func (s *XASink[T]) PrepareCommit(ckpt checkpoint.ID) (Committable, bool, error) {
	if err := s.flush(); err != nil {
		return Committable{}, false, err
	}
	if !s.inTx {
		return Committable{}, false, nil
	}
	gid := formatGID(s.uid, s.gen, s.subtask, ckpt)
	c, cancel := s.ctx()
	defer cancel()
	// A failed PREPARE TRANSACTION rolls the transaction back, so the
	// interval is gone either way.
	s.inTx = false
	tag, err := s.data.Exec(c, "PREPARE TRANSACTION "+quoteLiteral(gid))
	if err != nil {
		return Committable{}, false, prepareError(s.cfg.Table, gid, err)
	}
	// The server answers a PREPARE of an aborted transaction block with
	// ROLLBACK and no error: the interval's rows are gone, and a handle for
	// them would commit nothing.
	if got := tag.String(); got != "PREPARE TRANSACTION" {
		return Committable{}, false, fmt.Errorf("table %s: preparing transaction %s: the server answered %q, not PREPARE TRANSACTION "+
			"(the transaction had been aborted and was rolled back)", s.cfg.Table, gid, got)
	}
	return Committable{GID: gid}, true, nil
}

// Commit commits the prepared transaction. A gid the server no longer
// holds was committed before: the sink never rolls back a transaction that
// a handle names, so the handle's transaction can only have been committed.
func (s *XASink[T]) Commit(c Committable) error {
	return s.finish(c, "COMMIT PREPARED", "committing")
}

// Abort rolls the prepared transaction back; a gid the server no longer
// holds needs nothing.
func (s *XASink[T]) Abort(c Committable) error {
	return s.finish(c, "ROLLBACK PREPARED", "rolling back")
}

func (s *XASink[T]) finish(h Committable, stmt, verb string) error {
	if h.GID == "" {
		return fmt.Errorf("table %s: %s a handle without a transaction id", s.cfg.Table, verb)
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	if s.ctl.conn == nil {
		return fmt.Errorf("table %s: %s prepared transaction %s: the sink is not open", s.cfg.Table, verb, h.GID)
	}
	c, cancel := s.ctx()
	defer cancel()
	if _, err := s.ctl.conn.Exec(c, stmt+" "+quoteLiteral(h.GID)); err != nil {
		if isCode(err, codeUndefinedObject) {
			s.log.Debug("prepared transaction already finalised", "gid", h.GID, "statement", stmt)
			return nil
		}
		return fmt.Errorf("table %s: %s prepared transaction %s: %w", s.cfg.Table, verb, h.GID, err)
	}
	return nil
}

// Close closes both connections. The server rolls back the interval's
// open transaction; prepared ones stay for the next open to commit or
// roll back.
func (s *XASink[T]) Close() error {
	var errs []error
	if s.data != nil {
		if err := closeConn(s.data); err != nil {
			errs = append(errs, fmt.Errorf("table %s: closing the data connection: %w", s.cfg.Table, err))
		}
		s.data, s.inTx = nil, false
	}
	clear(s.rows)
	s.rows = s.rows[:0]
	s.ctl.Lock()
	conn := s.ctl.conn
	s.ctl.conn = nil
	s.ctl.Unlock()
	if err := closeConn(conn); err != nil {
		errs = append(errs, fmt.Errorf("table %s: closing the control connection: %w", s.cfg.Table, err))
	}
	return errors.Join(errs...)
}

var _ connector.CommittingSink[int, Committable] = (*XASink[int])(nil)
