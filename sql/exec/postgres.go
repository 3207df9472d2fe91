package exec

import (
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/postgres"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// The postgres connector writes a table of a PostgreSQL server, with the
// options of Flink's JDBC connector. It picks one of connectors/postgres's
// two sinks:
//
//   - a table with a PRIMARY KEY (and not 'exactly_once'), or with
//     `mode = 'upsert'`, gets the upsert sink: changelog rows become
//     upserts and deletes by key, so it takes updating queries, as Flink's
//     JDBC sink does in upsert mode;
//   - any other table gets the XA sink: rows are written in a prepared
//     transaction per subtask and checkpoint and committed when the
//     checkpoint completes, exactly once (which is also at least once). It
//     is append-only and needs max_prepared_transactions > 0.
func init() {
	registerConnector(connectorImpl{
		desc: &catalog.Connector{
			Name: "postgres", Sink: true, Upsert: true, TwoPhaseCommit: true,
			Options: map[string]string{
				"url":                        "postgres://host:port/db or jdbc:postgresql://host:port/db (required)",
				"table-name":                 "table to write, optionally schema.table; it must exist (required)",
				"username":                   "user name (default: the URL's)",
				"password":                   "password (default: the URL's)",
				"sink.buffer-flush.max-rows": "rows sent per COPY (exactly once) or distinct keys buffered before an early flush (upsert); default 4096 and 10000",
			},
			Validate: validatePostgres,
		},
		sink: postgresSink,
	})
}

// validatePostgres checks a postgres table's options and decides its sink:
// a primary key makes it an upsert table unless it is exactly once or
// explicitly `mode = 'append'`.
func validatePostgres(t *catalog.Table) error {
	for _, k := range []string{"url", "table-name"} {
		if t.Options[k] == "" {
			return &types.Error{Pos: t.Pos, Msg: fmt.Sprintf("table '%s' needs the option '%s'", t.Name, k)}
		}
	}
	if _, err := postgresURL(t); err != nil {
		return &types.Error{Pos: t.OptionPosition("url"), Msg: fmt.Sprintf("table '%s': option 'url': %v", t.Name, err)}
	}
	if err := parallelismOption(t, "sink.buffer-flush.max-rows"); err != nil {
		return err
	}
	mode := strings.ToLower(t.Options["mode"])
	if len(t.PrimaryKey) > 0 && t.Guarantee != "exactly_once" && mode != "append" && mode != "insert" {
		t.Upsert = true
	}
	for _, c := range t.Physical() {
		if _, err := pgValue(types.NullOf(c.Type.Kind), c.Type); err != nil {
			return &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("table '%s': column '%s': %v", t.Name, c.Name, err)}
		}
	}
	return nil
}

// postgresURL returns the connection string of a table: its 'url' (a JDBC
// URL turned into pgx's form) with 'username' and 'password' in it.
func postgresURL(t *catalog.Table) (string, error) {
	raw := t.Options["url"]
	if rest, ok := strings.CutPrefix(raw, "jdbc:"); ok {
		if !strings.HasPrefix(rest, "postgresql://") {
			return "", fmt.Errorf("want a jdbc:postgresql:// URL, got '%s'", raw)
		}
		raw = rest
	}
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return "", fmt.Errorf("want postgres://host:port/db or jdbc:postgresql://host:port/db, got '%s'", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing '%s': %v", raw, err)
	}
	q := u.Query()
	// JDBC passes the credentials as parameters; pgx takes them in the
	// user info.
	user, pass := q.Get("user"), q.Get("password")
	q.Del("user")
	q.Del("password")
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			pass = p
		}
	}
	if v, ok := t.Options["username"]; ok {
		user = v
	}
	if v, ok := t.Options["password"]; ok {
		pass = v
	}
	switch {
	case pass != "":
		u.User = url.UserPassword(user, pass)
	case user != "":
		u.User = url.User(user)
	}
	u.RawQuery = q.Encode()
	s := u.String()
	if _, err := pgx.ParseConfig(s); err != nil {
		return "", err
	}
	return s, nil
}

// pgValue converts a SQL value of column type t to what pgx writes into
// the column.
func pgValue(v types.Value, t types.Type) (any, error) {
	k := t.Kind
	if !v.IsNull() || k == types.KindNull {
		k = v.Kind()
	}
	switch {
	case k == types.KindNull:
		return nil, nil
	case k == types.KindBoolean, k.IsInteger(), k.IsApprox(), k == types.KindDecimal, k.IsString(), k.IsBinary(), k.IsTemporal():
	default:
		return nil, fmt.Errorf("type %s cannot be written to postgres", t.WithNotNull(false))
	}
	if v.IsNull() {
		return nil, nil
	}
	switch {
	case k == types.KindBoolean:
		return v.Bool(), nil
	case k.IsInteger():
		return v.Int64(), nil
	case k == types.KindFloat:
		return float32(v.Float64()), nil
	case k == types.KindDouble:
		return v.Float64(), nil
	case k == types.KindDecimal:
		var u *big.Int
		if v.IsCompact() {
			u = big.NewInt(v.Unscaled())
		} else {
			u = v.BigUnscaled()
		}
		return pgtype.Numeric{Int: u, Exp: -int32(v.Scale()), Valid: true}, nil
	case k.IsString():
		return v.Str(), nil
	case k.IsBinary():
		return v.Bytes(), nil
	case k == types.KindDate:
		return time.UnixMilli(v.Int64() * 86400000).UTC(), nil
	case k == types.KindTime:
		return pgtype.Time{Microseconds: v.Int64() / 1000, Valid: true}, nil
	}
	// TIMESTAMP is a wall-clock reading, written as the UTC time of its
	// digits; TIMESTAMP_LTZ an instant.
	return time.UnixMilli(v.EpochMillis()).Add(time.Duration(v.NanoOfMilli())).UTC(), nil
}

func postgresSink(b *builder, in clink.Stream[types.Row], n *planner.Sink) error {
	t := n.Table
	dsn, err := postgresURL(t)
	if err != nil {
		return fmt.Errorf("table '%s': %w", t.Name, err)
	}
	phys := t.Physical()
	cols := make([]string, len(phys))
	for i, c := range phys {
		cols[i] = c.Name
	}
	values := func(r types.Row) ([]any, error) {
		vals := make([]any, len(r.Values))
		for i, v := range r.Values {
			x, err := pgValue(v, phys[i].Type)
			if err != nil {
				return nil, fmt.Errorf("table '%s': column '%s': %w", t.Name, cols[i], err)
			}
			vals[i] = x
		}
		return vals, nil
	}
	var batch int
	if v, ok := t.Options["sink.buffer-flush.max-rows"]; ok {
		batch, _ = strconv.Atoi(v)
	}
	if !t.Upsert {
		// Values cannot fail: validatePostgres checked every column's type.
		newSink, err := postgres.XAFactory(postgres.XAConfig[types.Row]{
			URL: dsn, Table: t.Options["table-name"], Columns: cols, BatchRows: batch,
			Values: func(r types.Row) []any { v, _ := values(r); return v },
		})
		if err != nil {
			return fmt.Errorf("table '%s': %w", t.Name, err)
		}
		clink.CommitTo(in, n.UID(), newSink)
		return nil
	}
	var keyIdx []int
	for _, k := range t.PrimaryKey {
		keyIdx = append(keyIdx, slices.Index(cols, k))
	}
	sink, err := postgres.NewUpsertSink(postgres.UpsertConfig[types.Row]{
		URL: dsn, Table: t.Options["table-name"], Columns: cols, Key: t.PrimaryKey, MaxBufferedKeys: batch,
		Row: func(r types.Row) (connector.RowKind, []any) { v, _ := values(r); return r.Kind, v },
	})
	if err != nil {
		return fmt.Errorf("table '%s': %w", t.Name, err)
	}
	// The upsert sink converges only when every change of a key goes
	// through one subtask, in order: a hash exchange on the key.
	keyed := clink.KeyBy(in, func(r types.Row) string {
		var k []byte
		for _, i := range keyIdx {
			k = types.AppendKey(k, r.Values[i])
		}
		return string(k)
	})
	byKey := clink.Process(keyed, n.UID()+".key", func(_ *clink.KeyedContext[string, struct{}], r types.Row, out *clink.Collector[types.Row]) error {
		out.Collect(r)
		return nil
	})
	clink.SinkTo(byKey, n.UID(), clink.Sink[types.Row](sink))
	return nil
}
