package nexmark

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

const testBase = 1_700_000_000_000

func testGenerator(t testing.TB, mod func(*Config)) *Generator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BaseTime = testBase
	if mod != nil {
		mod(&cfg)
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// refLine formats event i's fields as the Java transcription that wrote
// testdata/java_first1000.txt prints them (everything but the url and the
// text of extra, which the reference draws from unseeded randoms).
func refLine(g *Generator, i int64) string {
	e := g.Event(i)
	switch e.Type {
	case PersonEvent:
		p := e.Person
		return fmt.Sprintf("%d P id=%d name=%s email=%s cc=%s city=%s state=%s ts=%d extra=%d", i, p.ID, p.Name, p.EmailAddress, p.CreditCard, p.City, p.State, p.DateTime, len(p.Extra))
	case AuctionEvent:
		a := e.Auction
		return fmt.Sprintf("%d A id=%d item=%s desc=%s initial=%d reserve=%d ts=%d expires=%d seller=%d category=%d extra=%d", i, a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category, len(a.Extra))
	}
	b := e.Bid
	return fmt.Sprintf("%d B auction=%d bidder=%d price=%d channel=%s ts=%d extra=%d", i, b.Auction, b.Bidder, b.Price, b.Channel, b.DateTime, len(b.Extra))
}

// TestMatchesJavaReference compares the first 1000 events with the output
// of the reference's model generators run on the JVM with a
// java.util.Random seeded by event id (default options, base time
// 1700000000000). The file was written once by a Java transcription of
// the reference; see docs/nexmark.md.
func TestMatchesJavaReference(t *testing.T) {
	g := testGenerator(t, nil)
	f, err := os.Open("testdata/java_first1000.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var i int64
	for sc.Scan() {
		if got := refLine(g, i); got != sc.Text() {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, sc.Text())
		}
		i++
	}
	if i != 1000 {
		t.Fatalf("read %d reference lines, want 1000", i)
	}
}

// TestGolden pins the first events in full, urls and extra text included,
// so that any change to what the generator emits is noticed. If a change
// is intended, update the digest and say why in the commit.
func TestGolden(t *testing.T) {
	g := testGenerator(t, nil)
	h := sha256.New()
	for i := int64(0); i < 10_000; i++ {
		fmt.Fprintf(h, "%+v\n", g.Event(i))
	}
	const want = "a52d49d7271bc25bf88db4b4a592f543e98e0e901f2f5f62783190327beea3f4"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("digest of the first 10000 events is %s, want %s", got, want)
	}
	// A few fields spelled out, for a readable failure.
	e := g.Event(2)
	if e.Type != BidEvent || e.Bid.Auction != 1000 || e.Bid.Bidder != 2001 || e.Bid.Price != 32530001 || e.Bid.Channel != "Google" ||
		!strings.HasPrefix(e.Bid.URL, "https://www.nexmark.com/") || !strings.HasSuffix(e.Bid.URL, "/item.htm?query=1") {
		t.Errorf("event 2 = %+v", e.Bid)
	}
}

func TestDeterministic(t *testing.T) {
	g1 := testGenerator(t, nil)
	g2 := testGenerator(t, nil)
	var reused Event
	for _, i := range []int64{0, 1, 47, 48, 49, 50, 999_999, 123_456_789, 1 << 40} {
		a, b := g1.Event(i), g2.Event(i)
		g2.Fill(i, &reused)
		if a != b || a != reused {
			t.Errorf("event %d differs between generators or after reuse:\n%+v\n%+v\n%+v", i, a, b, reused)
		}
	}
	// Another seed changes the draws but not the structure.
	g3 := testGenerator(t, func(c *Config) { c.Seed = 42 })
	same := 0
	for i := int64(0); i < 1000; i++ {
		a, b := g1.Event(i), g3.Event(i)
		if a.Type != b.Type || a.DateTime() != b.DateTime() {
			t.Fatalf("seed changed type or time of event %d", i)
		}
		if a == b {
			same++
		}
	}
	if same > 10 {
		t.Errorf("%d of 1000 events are equal under two seeds", same)
	}
}

func TestProportions(t *testing.T) {
	for _, pr := range [][3]int{{1, 3, 46}, {1, 1, 0}, {2, 5, 13}} {
		g := testGenerator(t, func(c *Config) {
			c.PersonProportion, c.AuctionProportion, c.BidProportion = pr[0], pr[1], pr[2]
		})
		total := int64(pr[0] + pr[1] + pr[2])
		n := 1000 * total
		var count [3]int64
		for i := int64(0); i < n; i++ {
			e := g.Event(i)
			if g.TypeOf(i) != e.Type {
				t.Fatalf("TypeOf(%d) = %v, event is %v", i, g.TypeOf(i), e.Type)
			}
			count[e.Type]++
		}
		for k := range 3 {
			if count[k] != 1000*int64(pr[k]) {
				t.Errorf("proportions %v: %d events of type %v in %d, want %d", pr, count[k], EventType(k), n, 1000*pr[k])
			}
		}
	}
}

func TestIDsAndRanges(t *testing.T) {
	g := testGenerator(t, nil)
	const n = 500_000
	nextPerson, nextAuction := int64(FirstPersonID+1), int64(FirstAuctionID+1)
	var hotAuction, hotBidder, hotChannel, bids, channelID int
	for i := int64(0); i < n; i++ {
		e := g.Event(i)
		switch e.Type {
		case PersonEvent:
			p := e.Person
			// Persons are numbered consecutively (the reference's first
			// event id is 2, so person 1000 never exists).
			if p.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", i, p.ID, nextPerson)
			}
			nextPerson++
			if len(p.CreditCard) != 19 || !strings.Contains(p.EmailAddress, "@") || !strings.HasSuffix(p.EmailAddress, ".com") {
				t.Fatalf("event %d: person %+v", i, p)
			}
		case AuctionEvent:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", i, a.ID, nextAuction)
			}
			nextAuction++
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+numCategories {
				t.Fatalf("event %d: category %d", i, a.Category)
			}
			if a.Reserve < a.InitialBid || a.InitialBid < 100 || a.InitialBid > 100_000_000 {
				t.Fatalf("event %d: initial bid %d, reserve %d", i, a.InitialBid, a.Reserve)
			}
			if a.Expires <= a.DateTime {
				t.Fatalf("event %d: expires %d at or before %d", i, a.Expires, a.DateTime)
			}
			if a.Seller < FirstPersonID || a.Seller >= nextPerson+personIDLead {
				t.Fatalf("event %d: seller %d, last person %d", i, a.Seller, nextPerson-1)
			}
		case BidEvent:
			b := e.Bid
			bids++
			if b.Auction < FirstAuctionID || b.Auction > nextAuction+auctionIDLead {
				t.Fatalf("event %d: bid on auction %d, last auction %d", i, b.Auction, nextAuction-1)
			}
			// The reference offsets bidders by FIRST_PERSON_ID twice.
			if b.Bidder < 2*FirstPersonID || b.Bidder > nextPerson+FirstPersonID+personIDLead {
				t.Fatalf("event %d: bidder %d, last person %d", i, b.Bidder, nextPerson-1)
			}
			if b.Price < 100 || b.Price > 100_000_000 {
				t.Fatalf("event %d: price %d", i, b.Price)
			}
			if (b.Auction-FirstAuctionID)%hotAuctionRatio == 0 {
				hotAuction++
			}
			if (b.Bidder-2*FirstPersonID)%hotBidderRatio == 1 {
				hotBidder++
			}
			switch b.Channel {
			case "Google", "Facebook", "Baidu", "Apple":
				hotChannel++
			default:
				if !strings.HasPrefix(b.Channel, "channel-") {
					t.Fatalf("event %d: channel %q", i, b.Channel)
				}
				if strings.Contains(b.URL, "&channel_id=") {
					channelID++
				}
			}
		}
	}
	// Hot ratios (2, 4 and the fixed 2 for channels), with a little room
	// for the random picks that land on a hot id anyway.
	within := func(name string, got int, of int, want float64) {
		if f := float64(got) / float64(of); math.Abs(f-want) > 0.02 {
			t.Errorf("%s: %.3f, want about %.3f", name, f, want)
		}
	}
	within("bids on hot auctions", hotAuction, bids, 0.5+0.5*0.01)
	within("bids by hot bidders", hotBidder, bids, 0.75+0.25*0.01)
	within("bids from hot channels", hotChannel, bids, 0.5)
	within("channel urls with channel_id", channelID, bids-hotChannel, 0.9)
}

// TestExtraSizes checks that extra pads each kind of event to its average
// size, counting the fields the reference counts.
func TestExtraSizes(t *testing.T) {
	for _, sizes := range [][3]int{{200, 500, 100}, {1000, 1000, 1000}, {10, 20, 30}} {
		g := testGenerator(t, func(c *Config) { c.AvgPersonSize, c.AvgAuctionSize, c.AvgBidSize = sizes[0], sizes[1], sizes[2] })
		var sum, cnt [3]float64
		for i := int64(0); i < 200_000; i++ {
			e := g.Event(i)
			var size int
			switch e.Type {
			case PersonEvent:
				p := e.Person
				size = 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra)
			case AuctionEvent:
				a := e.Auction
				size = 8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra)
			default:
				size = 32 + len(e.Bid.Extra)
			}
			sum[e.Type] += float64(size)
			cnt[e.Type]++
		}
		for k := range 3 {
			avg := sum[k] / cnt[k]
			want := float64(sizes[k])
			if sizes[k] < 100 {
				// Below the fixed fields' size, extra is empty.
				if avg < want {
					t.Errorf("sizes %v: %v events average %.1f bytes, below %v without extra", sizes, EventType(k), avg, want)
				}
				continue
			}
			if math.Abs(avg-want) > 0.01*want {
				t.Errorf("sizes %v: %v events average %.1f bytes, want %v", sizes, EventType(k), avg, want)
			}
		}
	}
}

func TestTimestamps(t *testing.T) {
	for _, rate := range []int{10000, 1000, 3, 1_000_000} {
		g := testGenerator(t, func(c *Config) { c.FirstEventRate = rate })
		for i := int64(0); i < 5000; i++ {
			// Event number i+1, 1e6/rate µs apart, truncated to ms.
			want := testBase + int64(float64(i+1)*(1e6/float64(rate)))/1000
			if got := g.Event(i).DateTime(); got != want || g.EventTime(i) != want {
				t.Fatalf("rate %d: event %d at %d, want %d", rate, i, got, want)
			}
		}
	}
	// Out-of-order groups shuffle ids and times within each group only.
	g := testGenerator(t, func(c *Config) { c.OutOfOrderGroupSize = 100 })
	for grp := int64(0); grp < 20; grp++ {
		ids := map[int64]bool{}
		for k := int64(0); k < 100; k++ {
			i := grp*100 + k - 1 // event numbers start at 1
			if i < 0 {
				continue
			}
			id := g.EventID(i)
			lo, hi := 1+grp*100, 1+grp*100+99
			if id < lo || id > hi || ids[id] {
				t.Fatalf("event %d has id %d, outside [%d, %d] or repeated", i, id, lo, hi)
			}
			ids[id] = true
			if g.EventTime(i) != g.timestampFor(id-1) {
				t.Fatalf("event %d: time %d does not follow its id %d", i, g.EventTime(i), id)
			}
		}
	}
}

// TestJavaRandom checks the generator against values java.util.Random
// gives (JDK 17): new Random(42).nextInt(), nextInt(10), nextLong(),
// nextDouble().
func TestJavaRandom(t *testing.T) {
	r := newJavaRandom(42)
	got := fmt.Sprint(r.nextInt(), r.intn(10), r.nextLong(), r.nextDouble())
	const want = "-1170105035 3 -5843495416241995736 0.30871945533265976"
	if got != want {
		t.Errorf("Random(42) draws %s, want %s", got, want)
	}
}

func TestParseOptions(t *testing.T) {
	c, err := ParseOptions(map[string]string{
		"connector": "nexmark", "first-event.rate": "5000", "next-event.rate": "5000", "events.num": "1000",
		"person.proportion": "2", "auction.proportion": "4", "bid.proportion": "44",
		"person.avg-size": "1kb", "auction.avg-size": "600b", "bid.avg-size": "120",
		"bid.hot-ratio.auctions": "3", "bid.hot-ratio.bidders": "5", "auction.hot-ratio.sellers": "6",
		"rate.shape": "SINE", "rate.period": "10 min", "max-emit-speed": "false",
		"base-time": "2024-01-02T03:04:05Z", "seed": "7", "out-of-order-group.size": "10",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		FirstEventRate: 5000, NextEventRate: 5000, RateShape: "sine", RatePeriod: 600e9, RateLimited: true, Events: 1000,
		PersonProportion: 2, AuctionProportion: 4, BidProportion: 44, AvgPersonSize: 1024, AvgAuctionSize: 600, AvgBidSize: 120,
		HotAuctionRatio: 3, HotBiddersRatio: 5, HotSellersRatio: 6, NumInFlightAuctions: 100, NumActivePeople: 1000,
		OutOfOrderGroupSize: 10, BaseTime: 1704164645000, Seed: 7,
	}
	if c != want {
		t.Errorf("ParseOptions gave\n%+v\nwant\n%+v", c, want)
	}
	for opts, msg := range map[string]string{
		"avg-person.size=200":   "'avg-person.size' = '200': unknown option (known: auction.avg-size",
		"first-event.rate=0":    "'first-event.rate' must be positive, got 0",
		"first-event.rate=fast": "'first-event.rate' = 'fast': not a 32-bit integer",
		"bid.avg-size=1tb":      `unknown memory unit "tb"`,
		"rate.shape=triangle":   `'rate.shape' must be square or sine, got "triangle"`,
		"events.num=-1":         "'events.num' must not be negative",
		"person.proportion=0":   "'person.proportion' must be positive",
	} {
		k, v, _ := strings.Cut(opts, "=")
		_, err := ParseOptions(map[string]string{k: v})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseOptions(%s) = %v, want an error containing %q", opts, err, msg)
		}
	}
}

// BenchmarkGenerate measures the generator alone, by event type and for
// the default mix. Report events per CPU-second with -cpu 1.
func BenchmarkGenerate(b *testing.B) {
	g := testGenerator(b, nil)
	for _, c := range []struct {
		name string
		want EventType
	}{{"mix", -1}, {"bid", BidEvent}, {"auction", AuctionEvent}, {"person", PersonEvent}} {
		b.Run(c.name, func(b *testing.B) {
			var idx []int64
			for i := int64(0); len(idx) < 4096; i++ {
				if c.want < 0 || g.TypeOf(i) == c.want {
					idx = append(idx, i)
				}
			}
			var e Event
			var sink int64
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				g.Fill(idx[n%len(idx)]+int64(n/len(idx))*50*4096, &e)
				sink += e.DateTime()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			_ = sink
		})
	}
}
