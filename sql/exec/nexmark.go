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

// nexmarkRow makes a table's rows from events. It is a plain struct with
// a method, not a set of closures, so that the event it reads stays on the
// caller's stack.
type nexmarkRow struct {
	// cols describe the physical columns in order.
	cols []nexmarkCol
	// size[t] is the number of values a row of an event of type t takes:
	// the columns, then the fields of its one non-NULL ROW.
	size [3]int
}

// nexmarkCol is one column: event_type (fields nil) or the ROW of the
// events of type et, with the fields it declares.
type nexmarkCol struct {
	kind   types.Kind // of event_type
	et     nexmark.EventType
	row    bool
	fields []nexmarkFieldOf
}

// nexmarkFieldOf is one declared field: which of the event's fields it is
// (a "row.field" name) and the kind and precision it is read as.
type nexmarkFieldOf struct {
	name string
	id   uint8 // the field's number (nexmarkFieldIDs)
	kind types.Kind
	prec int
}

// nexmarkConverter checks the table's physical columns against the events
// and returns what makes a row's values from an event.
func nexmarkConverter(t *catalog.Table) (*nexmarkRow, error) {
	conv := &nexmarkRow{}
	for _, c := range t.Physical() {
		if c.Name == "event_type" {
			if !c.Type.Kind.IsInteger() {
				return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark column 'event_type' must be an integer (INT), not %s", c.Type)}
			}
			conv.cols = append(conv.cols, nexmarkCol{kind: c.Type.Kind})
			continue
		}
		kinds, ok := nexmarkFieldKinds[c.Name]
		if !ok {
			return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark table '%s' has no column '%s'; its columns are event_type, person, auction and bid", t.Name, c.Name)}
		}
		if c.Type.Kind != types.KindRow {
			return nil, &types.Error{Pos: c.Pos, Msg: fmt.Sprintf("nexmark column '%s' must be a ROW<...> of %s, not %s", c.Name, fieldList(kinds), c.Type)}
		}
		col := nexmarkCol{row: true, et: map[string]nexmark.EventType{"person": nexmark.PersonEvent, "auction": nexmark.AuctionEvent, "bid": nexmark.BidEvent}[c.Name]}
		for _, f := range c.Type.Fields {
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
			name := c.Name + "." + f.Name
			id, ok := nexmarkFieldIDs[name]
			if !ok {
				return nil, fmt.Errorf("nexmark field '%s' has no getter", name)
			}
			col.fields = append(col.fields, nexmarkFieldOf{name: name, id: id, kind: k, prec: f.Type.Precision})
		}
		conv.cols = append(conv.cols, col)
	}
	for et := range conv.size {
		conv.size[et] = len(conv.cols)
		for _, c := range conv.cols {
			if c.row && int(c.et) == et {
				conv.size[et] += len(c.fields)
			}
		}
	}
	return conv, nil
}

// values returns the row of event e, in one allocation, with room for
// capacity values (at least the columns) before the ROW's fields.
func (conv *nexmarkRow) values(e *nexmark.Event, capacity int) []types.Value {
	width := len(conv.cols)
	capacity = max(capacity, width)
	buf := make([]types.Value, conv.size[e.Type]-width+capacity)
	vals, spare := buf[:width:capacity], buf[capacity:]
	for i, c := range conv.cols {
		switch {
		case !c.row:
			vals[i] = types.IntOf(c.kind, int64(e.Type))
		case c.et != e.Type:
			vals[i] = types.NullOf(types.KindRow)
		default:
			fs := spare[:len(c.fields):len(c.fields)]
			spare = spare[len(c.fields):]
			for j := range c.fields {
				fs[j] = nexmarkField(e, &c.fields[j])
			}
			vals[i] = types.RowValue(fs)
		}
	}
	return vals
}

func fieldList(kinds map[string]byte) string {
	var names []string
	for n := range kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// The fields of the events a nexmark column may declare, numbered so that
// reading one is a jump, not a comparison of names.
const (
	nxPersonID uint8 = iota
	nxPersonName
	nxPersonEmailAddress
	nxPersonCreditCard
	nxPersonCity
	nxPersonState
	nxPersonDateTime
	nxPersonExtra
	nxAuctionID
	nxAuctionItemName
	nxAuctionDescription
	nxAuctionInitialBid
	nxAuctionReserve
	nxAuctionDateTime
	nxAuctionExpires
	nxAuctionSeller
	nxAuctionCategory
	nxAuctionExtra
	nxBidAuction
	nxBidBidder
	nxBidPrice
	nxBidChannel
	nxBidURL
	nxBidDateTime
	nxBidExtra
)

// nexmarkFieldIDs maps a "row.field" name to its number.
var nexmarkFieldIDs = map[string]uint8{
	"person.id":           nxPersonID,
	"person.name":         nxPersonName,
	"person.emailAddress": nxPersonEmailAddress,
	"person.creditCard":   nxPersonCreditCard,
	"person.city":         nxPersonCity,
	"person.state":        nxPersonState,
	"person.dateTime":     nxPersonDateTime,
	"person.extra":        nxPersonExtra,
	"auction.id":          nxAuctionID,
	"auction.itemName":    nxAuctionItemName,
	"auction.description": nxAuctionDescription,
	"auction.initialBid":  nxAuctionInitialBid,
	"auction.reserve":     nxAuctionReserve,
	"auction.dateTime":    nxAuctionDateTime,
	"auction.expires":     nxAuctionExpires,
	"auction.seller":      nxAuctionSeller,
	"auction.category":    nxAuctionCategory,
	"auction.extra":       nxAuctionExtra,
	"bid.auction":         nxBidAuction,
	"bid.bidder":          nxBidBidder,
	"bid.price":           nxBidPrice,
	"bid.channel":         nxBidChannel,
	"bid.url":             nxBidURL,
	"bid.dateTime":        nxBidDateTime,
	"bid.extra":           nxBidExtra,
}

// nexmarkField returns one field of e as f declares it; the converter has
// checked that the event has it.
func nexmarkField(e *nexmark.Event, f *nexmarkFieldOf) types.Value {
	p, a, b := &e.Person, &e.Auction, &e.Bid
	switch f.id {
	case nxPersonID:
		return types.IntOf(f.kind, p.ID)
	case nxPersonName:
		return types.String(p.Name)
	case nxPersonEmailAddress:
		return types.String(p.EmailAddress)
	case nxPersonCreditCard:
		return types.String(p.CreditCard)
	case nxPersonCity:
		return types.String(p.City)
	case nxPersonState:
		return types.String(p.State)
	case nxPersonDateTime:
		return types.Timestamp(p.DateTime, 0, f.prec)
	case nxPersonExtra:
		return types.String(p.Extra)
	case nxAuctionID:
		return types.IntOf(f.kind, a.ID)
	case nxAuctionItemName:
		return types.String(a.ItemName)
	case nxAuctionDescription:
		return types.String(a.Description)
	case nxAuctionInitialBid:
		return types.IntOf(f.kind, a.InitialBid)
	case nxAuctionReserve:
		return types.IntOf(f.kind, a.Reserve)
	case nxAuctionDateTime:
		return types.Timestamp(a.DateTime, 0, f.prec)
	case nxAuctionExpires:
		return types.Timestamp(a.Expires, 0, f.prec)
	case nxAuctionSeller:
		return types.IntOf(f.kind, a.Seller)
	case nxAuctionCategory:
		return types.IntOf(f.kind, a.Category)
	case nxAuctionExtra:
		return types.String(a.Extra)
	case nxBidAuction:
		return types.IntOf(f.kind, b.Auction)
	case nxBidBidder:
		return types.IntOf(f.kind, b.Bidder)
	case nxBidPrice:
		return types.IntOf(f.kind, b.Price)
	case nxBidChannel:
		return types.String(b.Channel)
	case nxBidURL:
		return types.String(b.URL)
	case nxBidDateTime:
		return types.Timestamp(b.DateTime, 0, f.prec)
	case nxBidExtra:
		return types.String(b.Extra)
	}
	panic(fmt.Sprintf("nexmark field %s has no getter", f.name))
}

func nexmarkScan(b *builder, n *planner.Scan) (clink.Stream[types.Row], error) {
	t := n.Table
	cfg, err := nexmarkConfig(t)
	if err != nil {
		return clink.Stream[types.Row]{}, err
	}
	conv, err := nexmarkConverter(t)
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
	// Each row is made for its event alone, with room for what the Calcs
	// below write into it.
	capacity := b.rowCapacity(n)
	b.owned[n.UID()] = true
	rows := clink.Map(events, n.UID()+".rows", func(e nexmark.Event) types.Row {
		return types.Row{Kind: changelog.Insert, Values: conv.values(&e, capacity)}
	})
	return rows, nil
}
