package exec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connector/changelog"
	"github.com/clinkstream/clink/connectors/nexmark"
	"github.com/clinkstream/clink/sql/catalog"
	"github.com/clinkstream/clink/sql/planner"
	"github.com/clinkstream/clink/sql/types"
)

// The nexmark connector reads the Nexmark generator (connectors/nexmark)
// as Flink's nexmark connector declares it: a table with the columns
// event_type INT and person, auction and bid ROWs, one of which is set per
// row (the one event_type names; the others are NULL):
//
//	CREATE TABLE datagen (
//	    event_type INT,
//	    person ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
//	               city VARCHAR, state VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR>,
//	    auction ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
//	                reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3),
//	                seller BIGINT, category BIGINT, extra VARCHAR>,
//	    bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
//	            `dateTime` TIMESTAMP(3), extra VARCHAR>,
//	    ...
//	) WITH ('connector' = 'nexmark', 'events.num' = '10000000', ...)
//
// Columns and ROW fields are matched by name, so a table may declare a
// subset of them in any order; a name the generator does not know, or a
// type that does not fit the field, is an error at the column.
func init() {
	registerConnector(connectorImpl{desc: nexmarkConnector(), scan: nexmarkScan})
}

// nexmarkOptions are the options with a line of help; connectors/nexmark
// documents them in full.
var nexmarkOptions = map[string]string{
	"first-event.rate":          "events per second of event time (default 10000)",
	"next-event.rate":           "accepted; does not change the timeline, as in the reference",
	"rate.shape":                "square or sine; accepted, unused, as in the reference",
	"rate.period":               "accepted, unused, as in the reference",
	"rate.limited":              "true: emit about first-event.rate events per second (default false)",
	"max-emit-speed":            "false: same as rate.limited = true (default true)",
	"events.num":                "number of events; 0 is unbounded (default 0)",
	"person.proportion":         "persons in the event mix (default 1)",
	"auction.proportion":        "auctions in the event mix (default 3)",
	"bid.proportion":            "bids in the event mix (default 46)",
	"person.avg-size":           "average person size that extra pads to (default 200b)",
	"auction.avg-size":          "average auction size (default 500b)",
	"bid.avg-size":              "average bid size (default 100b)",
	"bid.hot-ratio.auctions":    "a bid is on a hot auction with probability 1-1/n (default 2)",
	"bid.hot-ratio.bidders":     "a bid is by a hot bidder with probability 1-1/n (default 4)",
	"auction.hot-ratio.sellers": "an auction is by a hot seller with probability 1-1/n (default 4)",
	"base-time":                 "start of the timeline, ms since 1970 or RFC 3339 (default: when the job starts)",
	"seed":                      "mixed into every event's random seed (default 0)",
	"out-of-order-group.size":   "events shuffled within groups of this many (default 1)",
	"scan.parallelism":          "parallelism of the source (default: the job's)",
}

// nexmarkFieldKinds are the fields of each ROW column, with the kind
// family each must have: 'i' integer, 's' string, 't' TIMESTAMP.
var nexmarkFieldKinds = map[string]map[string]byte{
	"person": {"id": 'i', "name": 's', "emailAddress": 's', "creditCard": 's', "city": 's', "state": 's', "dateTime": 't', "extra": 's'},
	"auction": {"id": 'i', "itemName": 's', "description": 's', "initialBid": 'i', "reserve": 'i', "dateTime": 't', "expires": 't',
		"seller": 'i', "category": 'i', "extra": 's'},
	"bid": {"auction": 'i', "bidder": 'i', "price": 'i', "channel": 's', "url": 's', "dateTime": 't', "extra": 's'},
}

func nexmarkConnector() *catalog.Connector {
	return &catalog.Connector{
		Name: "nexmark", Source: true,
		Options: nexmarkOptions,
		Validate: func(t *catalog.Table) error {
			if _, err := nexmarkConfig(t); err != nil {
				return err
			}
			if err := parallelismOption(t, "scan.parallelism"); err != nil {
				return err
			}
			_, err := nexmarkConverter(t)
			return err
		},
	}
}

// nexmarkConfig reads the table's options into the generator's Config;
// an error names the option.
func nexmarkConfig(t *catalog.Table) (nexmark.Config, error) {
	opts := map[string]string{}
	for k, v := range t.Options {
		if k != "connector" && k != "scan.parallelism" {
			opts[k] = v
		}
	}
	// Each option alone first, so that a bad value is reported where it
	// was written.
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := nexmark.ParseOptions(map[string]string{k: opts[k]}); err != nil {
			return nexmark.Config{}, &types.Error{Pos: t.OptionPosition(k), Msg: fmt.Sprintf("table '%s': %v", t.Name, err)}
		}
	}
	cfg, err := nexmark.ParseOptions(opts)
	if err != nil {
		return nexmark.Config{}, &types.Error{Pos: t.Pos, Msg: fmt.Sprintf("table '%s': %v", t.Name, err)}
	}
	return cfg, nil
}

// nexmarkConverter checks the table's physical columns against the events
// and returns the function that makes a row's values from an event.
func nexmarkConverter(t *catalog.Table) (func(*nexmark.Event) []types.Value, error) {
	var fills []func(e *nexmark.Event, vals, spare []types.Value)
	maxFields := 0
	for i, c := range t.Physical() {
		if c.Name == "event_type" {
			if !c.Type.Kind.IsInteger() {
				return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark column 'event_type' must be an integer (INT), not %s", c.Type)}
			}
			k := c.Type.Kind
			fills = append(fills, func(e *nexmark.Event, vals, _ []types.Value) { vals[i] = types.IntOf(k, int64(e.Type)) })
			continue
		}
		kinds, ok := nexmarkFieldKinds[c.Name]
		if !ok {
			return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark table '%s' has no column '%s'; its columns are event_type, person, auction and bid", t.Name, c.Name)}
		}
		if c.Type.Kind != types.KindRow {
			return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark column '%s' must be a ROW<...> of %s, not %s", c.Name, fieldList(kinds), c.Type)}
		}
		get := make([]func(*nexmark.Event) types.Value, len(c.Type.Fields))
		for j, f := range c.Type.Fields {
			want, ok := kinds[f.Name]
			if !ok {
				return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark column '%s' has no field '%s'; its fields are %s", c.Name, f.Name, fieldList(kinds))}
			}
			k := f.Type.Kind
			okKind := want == 'i' && k.IsInteger() || want == 's' && k.IsString() || want == 't' && k == types.KindTimestamp
			if !okKind {
				wantName := map[byte]string{'i': "BIGINT", 's': "VARCHAR", 't': "TIMESTAMP(3)"}[want]
				return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark field '%s.%s' must be %s, not %s", c.Name, f.Name, wantName, f.Type)}
			}
			get[j] = nexmarkField(c.Name, f.Name, f.Type)
		}
		et := map[string]nexmark.EventType{"person": nexmark.PersonEvent, "auction": nexmark.AuctionEvent, "bid": nexmark.BidEvent}[c.Name]
		fills = append(fills, func(e *nexmark.Event, vals, spare []types.Value) {
			if e.Type != et {
				vals[i] = types.NullOf(types.KindRow)
				return
			}
			fs := spare[:len(get):len(get)]
			for j, g := range get {
				fs[j] = g(e)
			}
			vals[i] = types.RowValue(fs)
		})
		maxFields = max(maxFields, len(get))
	}
	width := len(fills)
	// One allocation holds a row's values and the fields of its one
	// non-NULL ROW.
	return func(e *nexmark.Event) []types.Value {
		buf := make([]types.Value, width+maxFields)
		vals := buf[:width:width]
		for _, f := range fills {
			f(e, vals, buf[width:])
		}
		return vals
	}, nil
}

func fieldList(kinds map[string]byte) string {
	var names []string
	for n := range kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// nexmarkField returns the getter of one field, its value of type t.
func nexmarkField(row, field string, t types.Type) func(*nexmark.Event) types.Value {
	k, p := t.Kind, t.Precision
	i := func(f func(*nexmark.Event) int64) func(*nexmark.Event) types.Value {
		return func(e *nexmark.Event) types.Value { return types.IntOf(k, f(e)) }
	}
	s := func(f func(*nexmark.Event) string) func(*nexmark.Event) types.Value {
		return func(e *nexmark.Event) types.Value { return types.String(f(e)) }
	}
	ts := func(f func(*nexmark.Event) int64) func(*nexmark.Event) types.Value {
		return func(e *nexmark.Event) types.Value { return types.Timestamp(f(e), 0, p) }
	}
	switch row + "." + field {
	case "person.id":
		return i(func(e *nexmark.Event) int64 { return e.Person.ID })
	case "person.name":
		return s(func(e *nexmark.Event) string { return e.Person.Name })
	case "person.emailAddress":
		return s(func(e *nexmark.Event) string { return e.Person.EmailAddress })
	case "person.creditCard":
		return s(func(e *nexmark.Event) string { return e.Person.CreditCard })
	case "person.city":
		return s(func(e *nexmark.Event) string { return e.Person.City })
	case "person.state":
		return s(func(e *nexmark.Event) string { return e.Person.State })
	case "person.dateTime":
		return ts(func(e *nexmark.Event) int64 { return e.Person.DateTime })
	case "person.extra":
		return s(func(e *nexmark.Event) string { return e.Person.Extra })
	case "auction.id":
		return i(func(e *nexmark.Event) int64 { return e.Auction.ID })
	case "auction.itemName":
		return s(func(e *nexmark.Event) string { return e.Auction.ItemName })
	case "auction.description":
		return s(func(e *nexmark.Event) string { return e.Auction.Description })
	case "auction.initialBid":
		return i(func(e *nexmark.Event) int64 { return e.Auction.InitialBid })
	case "auction.reserve":
		return i(func(e *nexmark.Event) int64 { return e.Auction.Reserve })
	case "auction.dateTime":
		return ts(func(e *nexmark.Event) int64 { return e.Auction.DateTime })
	case "auction.expires":
		return ts(func(e *nexmark.Event) int64 { return e.Auction.Expires })
	case "auction.seller":
		return i(func(e *nexmark.Event) int64 { return e.Auction.Seller })
	case "auction.category":
		return i(func(e *nexmark.Event) int64 { return e.Auction.Category })
	case "auction.extra":
		return s(func(e *nexmark.Event) string { return e.Auction.Extra })
	case "bid.auction":
		return i(func(e *nexmark.Event) int64 { return e.Bid.Auction })
	case "bid.bidder":
		return i(func(e *nexmark.Event) int64 { return e.Bid.Bidder })
	case "bid.price":
		return i(func(e *nexmark.Event) int64 { return e.Bid.Price })
	case "bid.channel":
		return s(func(e *nexmark.Event) string { return e.Bid.Channel })
	case "bid.url":
		return s(func(e *nexmark.Event) string { return e.Bid.URL })
	case "bid.dateTime":
		return ts(func(e *nexmark.Event) int64 { return e.Bid.DateTime })
	case "bid.extra":
		return s(func(e *nexmark.Event) string { return e.Bid.Extra })
	}
	panic(fmt.Sprintf("nexmark field %s.%s has no getter", row, field))
}

func nexmarkScan(b *builder, n *planner.Scan) (clink.Stream[types.Row], error) {
	t := n.Table
	cfg, err := nexmarkConfig(t)
	if err != nil {
		return clink.Stream[types.Row]{}, err
	}
	fill, err := nexmarkConverter(t)
	if err != nil {
		return clink.Stream[types.Row]{}, err
	}
	src, err := nexmark.NewSource(cfg)
	if err != nil {
		return clink.Stream[types.Row]{}, fmt.Errorf("table '%s': %w", t.Name, err)
	}
	par := b.env.Options().Parallelism
	if v, ok := t.Options["scan.parallelism"]; ok {
		par, _ = strconv.Atoi(v)
	}
	events := clink.FromSource(b.env, n.UID(), par, connector.Source[nexmark.Event](src))
	rows := clink.Map(events, n.UID()+".rows", func(e nexmark.Event) types.Row {
		return types.Row{Kind: changelog.Insert, Values: fill(&e)}
	})
	return rows, nil
}
