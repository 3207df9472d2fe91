package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultTimeout bounds each round of statements a sink sends (one COPY,
// one PREPARE, one COMMIT PREPARED, one flush) when the configuration sets
// no timeout.
const DefaultTimeout = 2 * time.Minute

// SQLSTATE codes the sinks tell apart.
const (
	codeUndefinedObject  = "42704" // no prepared transaction of that gid
	codeNotInPrereqState = "55000" // prepared transactions are disabled
)

// parseTable splits a table name, optionally qualified by its schema
// ("schema.table"), into the identifier pgx quotes.
func parseTable(table string) (pgx.Identifier, error) {
	if table == "" {
		return nil, errors.New("no table given")
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("table %q: want table or schema.table", table)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("table %q: empty name part", table)
		}
	}
	return pgx.Identifier(parts), nil
}

func checkColumns(table string, cols []string) error {
	if len(cols) == 0 {
		return fmt.Errorf("table %s: no columns given", table)
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if c == "" {
			return fmt.Errorf("table %s: empty column name", table)
		}
		if seen[c] {
			return fmt.Errorf("table %s: column %q given twice", table, c)
		}
		seen[c] = true
	}
	return nil
}

func quoteColumns(cols []string) []string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = pgx.Identifier{c}.Sanitize()
	}
	return q
}

func connect(url, table string, timeout time.Duration) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres for table %s: %w", table, err)
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) error {
	if conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return conn.Close(ctx)
}

// errPreparedDisabled is the error of a server that refuses prepared
// transactions.
func errPreparedDisabled(table string) error {
	return fmt.Errorf("table %s: the postgres server has max_prepared_transactions = 0, so the exactly-once sink cannot prepare transactions; "+
		"set max_prepared_transactions to at least the sink's parallelism times the checkpoints in flight "+
		"(e.g. ALTER SYSTEM SET max_prepared_transactions = 64, or the same line in postgresql.conf) and restart the server", table)
}

// checkPreparedSetting checks the server's max_prepared_transactions, as
// SHOW prints it.
func checkPreparedSetting(table, value string) error {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil {
		return fmt.Errorf("table %s: reading the server's max_prepared_transactions %q: %w", table, value, err)
	}
	if n <= 0 {
		return errPreparedDisabled(table)
	}
	return nil
}

// prepareError explains a failed PREPARE TRANSACTION.
func prepareError(table, gid string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeNotInPrereqState && strings.Contains(pe.Message, "prepared transactions are disabled") {
		return fmt.Errorf("preparing transaction %s: %w", gid, errPreparedDisabled(table))
	}
	return fmt.Errorf("table %s: preparing transaction %s: %w", table, gid, err)
}

// isCode reports whether err is a server error of SQLSTATE code.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
