package sql_test

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/connectors/nexmark"
	"github.com/clinkstream/clink/sql"
)

// TestNexmarkConnector reads a nexmark table that declares a subset of the
// generator's columns and fields, in an order of its own, and checks the
// rows against the generator.
func TestNexmarkConnector(t *testing.T) {
	const base, events = 1436918400000, 300
	out := run(t, fmt.Sprintf(`
CREATE TABLE events (
  auction ROW<seller BIGINT, id BIGINT, expires TIMESTAMP(3)>,
  event_type TINYINT,
  bid ROW<price BIGINT>
) WITH ('connector' = 'nexmark', 'events.num' = '%d', 'base-time' = '%d');
CREATE TABLE out (k TINYINT, id BIGINT, seller BIGINT, expires TIMESTAMP(3), price BIGINT) WITH ('connector' = 'print');
INSERT INTO out SELECT event_type, auction.id, events.auction.seller, auction.expires, bid.price FROM events WHERE event_type > 0;
`, events, base), 2)
	got := materialize(t, out)

	g := testGenerator(t, events, base)
	var want []string
	for i := range int64(events) {
		e := g.Event(i)
		switch e.Type {
		case nexmark.AuctionEvent:
			a := e.Auction
			want = append(want, fmt.Sprintf("[1, %d, %d, %s, NULL]", a.ID, a.Seller, time.UnixMilli(a.Expires).UTC().Format("2006-01-02 15:04:05.000")))
		case nexmark.BidEvent:
			want = append(want, fmt.Sprintf("[2, NULL, NULL, NULL, %d]", e.Bid.Price))
		}
	}
	slices.Sort(want)
	if len(want) < events/2 || !slices.Equal(got, want) {
		t.Fatalf("got %d rows, want %d\n got: %.300v\nwant: %.300v", len(got), len(want), got, want)
	}
}

func TestNexmarkConnectorErrors(t *testing.T) {
	for _, tc := range []struct{ cols, opts, want string }{
		{"event_type INT, bids ROW<price BIGINT>", "",
			"nexmark table 'n' has no column 'bids'; its columns are event_type, person, auction and bid at line 2, column 33"},
		{"bid ROW<prize BIGINT>", "",
			"nexmark column 'bid' has no field 'prize'; its fields are auction, bidder, channel, dateTime, extra, price, url at line 2, column 17"},
		{"bid ROW<price VARCHAR>", "", "nexmark field 'bid.price' must be BIGINT, not VARCHAR(1) at line 2, column 17"},
		{"bid BIGINT", "", "nexmark column 'bid' must be a ROW<...> of auction, bidder, channel, dateTime, extra, price, url, not BIGINT"},
		{"event_type STRING", "", "nexmark column 'event_type' must be an integer (INT), not STRING at line 2, column 17"},
		{"event_type INT", ", 'events.num' = 'many'",
			"table 'n': nexmark option 'events.num' = 'many': not a 64-bit integer at line 2, column 64"},
		{"event_type INT", ", 'bid.proportion' = '-1'", "table 'n': 'bid.proportion' must not be negative, got -1 at line 2, column 64"},
		{"event_type INT", ", 'rows-per-second' = '5'", "unsupported option 'rows-per-second' for connector 'nexmark'"},
	} {
		script := fmt.Sprintf("\nCREATE TABLE n (%s) WITH ('connector' = 'nexmark'%s);", tc.cols, tc.opts)
		_, err := sql.Prepare(script, sql.Options{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n got: %v\nwant: %s", script, err, tc.want)
		}
	}
}

// TestNexmarkConnectorEveryField reads every field of the three ROW
// columns and checks each against the generator's event.
func TestNexmarkConnectorEveryField(t *testing.T) {
	const base, events = 1436918400000, 200
	out := run(t, fmt.Sprintf(`
CREATE TABLE events (
  event_type INT,
  person ROW<id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR,
             city VARCHAR, state VARCHAR, `+"`dateTime`"+` TIMESTAMP(3), extra VARCHAR>,
  auction ROW<id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT,
              reserve BIGINT, `+"`dateTime`"+` TIMESTAMP(3), expires TIMESTAMP(3),
              seller BIGINT, category BIGINT, extra VARCHAR>,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
          `+"`dateTime`"+` TIMESTAMP(3), extra VARCHAR>
) WITH ('connector' = 'nexmark', 'events.num' = '%d', 'base-time' = '%d');
CREATE TABLE p (a BIGINT, b VARCHAR, c VARCHAR, d VARCHAR, e VARCHAR, f VARCHAR, g TIMESTAMP(3), h VARCHAR)
  WITH ('connector' = 'print', 'print-identifier' = 'p');
CREATE TABLE a (a BIGINT, b VARCHAR, c VARCHAR, d BIGINT, e BIGINT, f TIMESTAMP(3), g TIMESTAMP(3), h BIGINT, i BIGINT, j VARCHAR)
  WITH ('connector' = 'print', 'print-identifier' = 'a');
CREATE TABLE b (a BIGINT, b BIGINT, c BIGINT, d VARCHAR, e VARCHAR, f TIMESTAMP(3), g VARCHAR)
  WITH ('connector' = 'print', 'print-identifier' = 'b');
INSERT INTO p SELECT person.id, person.name, person.emailAddress, person.creditCard, person.city, person.state,
  person.`+"`dateTime`"+`, person.extra FROM events WHERE event_type = 0;
INSERT INTO a SELECT auction.id, auction.itemName, auction.description, auction.initialBid, auction.reserve,
  auction.`+"`dateTime`"+`, auction.expires, auction.seller, auction.category, auction.extra FROM events WHERE event_type = 1;
INSERT INTO b SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url, bid.`+"`dateTime`"+`, bid.extra
  FROM events WHERE event_type = 2;
`, events, base), 1)
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)

	g := testGenerator(t, events, base)
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }
	var want []string
	for i := range int64(events) {
		e := g.Event(i)
		switch e.Type {
		case nexmark.PersonEvent:
			p := e.Person
			want = append(want, fmt.Sprintf("p> +I[%d, %s, %s, %s, %s, %s, %s, %s]", p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, ts(p.DateTime), p.Extra))
		case nexmark.AuctionEvent:
			a := e.Auction
			want = append(want, fmt.Sprintf("a> +I[%d, %s, %s, %d, %d, %s, %s, %d, %d, %s]", a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, ts(a.DateTime), ts(a.Expires), a.Seller, a.Category, a.Extra))
		case nexmark.BidEvent:
			b := e.Bid
			want = append(want, fmt.Sprintf("b> +I[%d, %d, %d, %s, %s, %s, %s]", b.Auction, b.Bidder, b.Price, b.Channel, b.URL, ts(b.DateTime), b.Extra))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d rows, want %d\n got: %.600v\nwant: %.600v", len(got), len(want), got, want)
	}
}

// testGenerator returns the generator of the default configuration with
// the given number of events and base time.
func testGenerator(t *testing.T, events, base int64) *nexmark.Generator {
	t.Helper()
	cfg := nexmark.DefaultConfig()
	cfg.Events, cfg.BaseTime = events, base
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
