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

	cfg := nexmark.DefaultConfig()
	cfg.Events, cfg.BaseTime = events, base
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
