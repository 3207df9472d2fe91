package nexmark

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Generator computes events by index. Event i is a pure function of the
// configuration and i: its random draws come from a java.util.Random
// seeded with the event's id (xor Config.Seed), as the reference seeds
// one per event, so any event can be regenerated alone, in any order, by
// any subtask. A Generator is immutable after NewGenerator and safe for
// concurrent use.
//
// Indexes map onto the reference's numbering at parallelism 1 (its table
// source starts at event id 1 and event number 1): index i is event number
// n = i+1, whose out-of-order-adjusted number a gives the event id a+1
// and the event time baseTime + floor(a * 1e6/FirstEventRate µs) in ms.
type Generator struct {
	cfg     Config
	total   int64
	delayUs float64
	// names are every "First Last" combination, by first*len(lastNames)+last.
	names []string
	// hotURLs and the channel tables are the reference's URL caches; the
	// reference fills them from an unseeded Random, we from seeded ones.
	hotURLs     [len(hotChannels)]string
	channels    []string
	channelURLs []string
	// pool is shared random text, written with the reference's
	// nextExactString; an extra field is a slice of it.
	pool string
}

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	// hotChannels are the reference's four hot channels.
	hotChannels = [...]string{"Google", "Facebook", "Baidu", "Apple"}
)

// Salts separate the seeds of the URL tables and the pool from event ids.
const (
	hotURLSalt  = 0x6e65786d61726b00 // "nexmark\0"
	channelSalt = 0x6e65786d61726b01
	poolSalt    = 0x6e65786d61726b02
	poolBase    = 1 << 16
)

// NewGenerator validates cfg and precomputes the shared tables. A zero
// BaseTime takes the wall clock now.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BaseTime == 0 {
		cfg.BaseTime = time.Now().UnixMilli()
	}
	g := &Generator{
		cfg:     cfg,
		total:   cfg.totalProportion(),
		delayUs: 1e6 / float64(cfg.FirstEventRate),
	}
	g.names = make([]string, 0, len(firstNames)*len(lastNames))
	for _, f := range firstNames {
		for _, l := range lastNames {
			g.names = append(g.names, f+" "+l)
		}
	}
	for i := range g.hotURLs {
		r := newJavaRandom(cfg.Seed ^ hotURLSalt + int64(i))
		g.hotURLs[i] = baseURL(&r)
	}
	g.channels = make([]string, channelsNumber)
	g.channelURLs = make([]string, channelsNumber)
	for n := range channelsNumber {
		r := newJavaRandom(cfg.Seed ^ channelSalt + int64(n))
		url := baseURL(&r)
		// As the reference: nine in ten channel urls carry the channel id,
		// bit-reversed.
		if r.intn(10) > 0 {
			id := int32(bits.Reverse32(uint32(n)))
			if id < 0 {
				id = -id // Math.abs; MinInt32 stays negative, as in Java
			}
			url += "&channel_id=" + strconv.Itoa(int(id))
		}
		g.channels[n] = "channel-" + strconv.Itoa(n)
		g.channelURLs[n] = url
	}
	maxExtra := 0
	for _, avg := range []int{cfg.AvgPersonSize, cfg.AvgAuctionSize, cfg.AvgBidSize} {
		maxExtra = max(maxExtra, avg+int(math.Round(float64(avg)*0.2))+1)
	}
	r := newJavaRandom(cfg.Seed ^ poolSalt)
	g.pool = string(appendExactString(make([]byte, 0, poolBase+maxExtra), &r, poolBase+maxExtra))
	return g, nil
}

// Config returns the generator's configuration, its base time resolved.
func (g *Generator) Config() Config { return g.cfg }

// eventNumber is the reference's event number of index i (its table
// source's first event number is 1).
func eventNumber(i int64) int64 { return i + 1 }

// adjusted is the reference's nextAdjustedEventNumber: within a group of
// OutOfOrderGroupSize numbers, a fixed shuffle.
func (g *Generator) adjusted(n int64) int64 {
	k := g.cfg.OutOfOrderGroupSize
	return n/k*k + (n*953)%k
}

// timestampFor is the reference's timestampForEvent.
func (g *Generator) timestampFor(n int64) int64 {
	return g.cfg.BaseTime + int64(float64(n)*g.delayUs)/1000
}

// EventID is the id of event i: the seed of its random draws and what
// decides its type (id mod the sum of the proportions).
func (g *Generator) EventID(i int64) int64 { return 1 + g.adjusted(eventNumber(i)) }

// EventTime is event i's event time in ms.
func (g *Generator) EventTime(i int64) int64 { return g.timestampFor(g.adjusted(eventNumber(i))) }

// dueOffset is how long after the timeline's start event i is due, in ms
// of wall time, when emission is paced (the reference's wallclock
// timestamp uses the unadjusted number).
func (g *Generator) dueOffset(i int64) int64 { return g.timestampFor(eventNumber(i)) - g.cfg.BaseTime }

// TypeOf is the type of event i, known without generating it.
func (g *Generator) TypeOf(i int64) EventType { return g.typeOfID(g.EventID(i)) }

func (g *Generator) typeOfID(id int64) EventType {
	rem := id % g.total
	switch {
	case rem < int64(g.cfg.PersonProportion):
		return PersonEvent
	case rem < int64(g.cfg.PersonProportion+g.cfg.AuctionProportion):
		return AuctionEvent
	}
	return BidEvent
}

// Event returns event i (i >= 0).
func (g *Generator) Event(i int64) Event {
	var e Event
	g.Fill(i, &e)
	return e
}

// Fill overwrites *e with event i.
func (g *Generator) Fill(i int64, e *Event) {
	a := g.adjusted(eventNumber(i))
	id := 1 + a
	ts := g.timestampFor(a)
	r := newJavaRandom(id ^ g.cfg.Seed)
	*e = Event{Type: g.typeOfID(id)}
	switch e.Type {
	case PersonEvent:
		g.person(&e.Person, id, &r, ts)
	case AuctionEvent:
		g.auction(&e.Auction, a, id, &r, ts)
	default:
		g.bid(&e.Bid, id, &r, ts)
	}
}

// lastBase0PersonID is the last person id (from 0) created by event id.
func (g *Generator) lastBase0PersonID(id int64) int64 {
	epoch, off := id/g.total, id%g.total
	if off >= int64(g.cfg.PersonProportion) {
		off = int64(g.cfg.PersonProportion) - 1
	}
	return epoch*int64(g.cfg.PersonProportion) + off
}

// lastBase0AuctionID is the last auction id (from 0) created by event id.
func (g *Generator) lastBase0AuctionID(id int64) int64 {
	epoch, off := id/g.total, id%g.total
	p, a := int64(g.cfg.PersonProportion), int64(g.cfg.AuctionProportion)
	switch {
	case off < p:
		epoch--
		off = a - 1
	case off >= p+a:
		off = a - 1
	default:
		off -= p
	}
	return epoch*a + off
}

// nextBase0PersonID picks one of the active people, or one a little
// ahead of the last created.
func (g *Generator) nextBase0PersonID(id int64, r *javaRandom) int64 {
	numPeople := g.lastBase0PersonID(id) + 1
	active := min(numPeople, int64(g.cfg.NumActivePeople))
	return numPeople - active + r.longn(active+personIDLead)
}

// nextBase0AuctionID picks an auction likely still in flight, or one a
// little ahead of the last created.
func (g *Generator) nextBase0AuctionID(id int64, r *javaRandom) int64 {
	maxA := g.lastBase0AuctionID(id)
	minA := max(maxA-int64(g.cfg.NumInFlightAuctions), 0)
	return minA + r.longn(maxA-minA+1+auctionIDLead)
}

// nextPrice is the reference's log-uniform price: 10^(6u) * 100, rounded
// as Java's Math.round.
func nextPrice(r *javaRandom) int64 {
	x := r.nextDouble() * 6
	// exp(x ln 10) is several times faster than math.Pow and within a few
	// ulps of it; only where that could move the rounding (v within 1e-12
	// relative of a half) is the exact power taken.
	v := math.Exp(x*math.Ln10) * 100
	if f := v - math.Floor(v); math.Abs(f-0.5) < v*1e-12 {
		v = math.Pow(10, x) * 100
	}
	return int64(math.Floor(v + 0.5))
}

func (g *Generator) person(p *Person, id int64, r *javaRandom, ts int64) {
	p.ID = g.lastBase0PersonID(id) + FirstPersonID
	first := r.intn(int32(len(firstNames)))
	last := r.intn(int32(len(lastNames)))
	p.Name = g.names[int(first)*len(lastNames)+int(last)]
	var buf [40]byte
	b := appendString(buf[:0], r, 7, ' ')
	b = append(b, '@')
	b = appendString(b, r, 5, ' ')
	b = append(b, ".com"...)
	p.EmailAddress = string(b)
	b = buf[:0]
	for k := range 4 {
		if k > 0 {
			b = append(b, ' ')
		}
		v := r.intn(10000)
		b = append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	p.CreditCard = string(b)
	p.City = usCities[r.intn(int32(len(usCities)))]
	p.State = usStates[r.intn(int32(len(usStates)))]
	p.DateTime = ts
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.extra(r, size, g.cfg.AvgPersonSize)
}

// auction builds an auction; a is the event's adjusted event number.
func (g *Generator) auction(x *Auction, a, id int64, r *javaRandom, ts int64) {
	x.ID = g.lastBase0AuctionID(id) + FirstAuctionID
	if r.intn(int32(g.cfg.HotSellersRatio)) > 0 {
		x.Seller = g.lastBase0PersonID(id) / hotSellerRatio * hotSellerRatio
	} else {
		x.Seller = g.nextBase0PersonID(id, r)
	}
	x.Seller += FirstPersonID
	x.Category = FirstCategoryID + int64(r.intn(numCategories))
	x.InitialBid = nextPrice(r)
	// The auction runs on average until numInFlightAuctions more auctions
	// have been created.
	ahead := int64(g.cfg.NumInFlightAuctions) * g.total / int64(g.cfg.AuctionProportion)
	horizon := g.timestampFor(a+ahead) - ts
	x.Expires = ts + 1 + r.longn(max(horizon*2, 1))
	var buf [100]byte
	x.ItemName = string(appendString(buf[:0], r, 20, ' '))
	x.Description = string(appendString(buf[:0], r, 100, ' '))
	x.Reserve = x.InitialBid + nextPrice(r)
	x.DateTime = ts
	size := 8 + len(x.ItemName) + len(x.Description) + 8 + 8 + 8 + 8 + 8
	x.Extra = g.extra(r, size, g.cfg.AvgAuctionSize)
}

func (g *Generator) bid(b *Bid, id int64, r *javaRandom, ts int64) {
	if r.intn(int32(g.cfg.HotAuctionRatio)) > 0 {
		b.Auction = g.lastBase0AuctionID(id) / hotAuctionRatio * hotAuctionRatio
	} else {
		b.Auction = g.nextBase0AuctionID(id, r)
	}
	b.Auction += FirstAuctionID
	if r.intn(int32(g.cfg.HotBiddersRatio)) > 0 {
		b.Bidder = g.lastBase0PersonID(id)/hotBidderRatio*hotBidderRatio + 1
	} else {
		b.Bidder = g.nextBase0PersonID(id, r)
	}
	// The reference adds FIRST_PERSON_ID twice to a bidder (once here,
	// once after choosing the channel); kept, so that results match its.
	b.Bidder += 2 * FirstPersonID
	b.Price = nextPrice(r)
	if r.intn(hotChannelsRatio) > 0 {
		k := r.intn(int32(len(hotChannels)))
		b.Channel, b.URL = hotChannels[k], g.hotURLs[k]
	} else {
		n := r.intn(channelsNumber)
		b.Channel, b.URL = g.channels[n], g.channelURLs[n]
	}
	b.DateTime = ts
	b.Extra = g.extra(r, 8+8+8+8, g.cfg.AvgBidSize)
}

// extra is the reference's nextExtra: a string whose length brings size
// to avg on average (uniform within ±20% of the remainder). Its length is
// drawn as the reference draws it; its text is a slice of the shared pool
// at an offset drawn after, so an extra field allocates nothing.
func (g *Generator) extra(r *javaRandom, size, avg int) string {
	if size > avg {
		return ""
	}
	avg -= size
	delta := int(math.Floor(float64(avg)*0.2 + 0.5))
	n := avg - delta
	if delta != 0 {
		n += int(r.intn(int32(2 * delta)))
	}
	off := int(r.intn(int32(len(g.pool) - n + 1)))
	return g.pool[off : off+n]
}

// appendString is the reference's nextString(random, maxLength, special):
// 3 to maxLength-1 random letters, each 1 in 13 the special character,
// then trimmed of spaces at both ends (Java's String.trim).
func appendString(dst []byte, r *javaRandom, maxLength int32, special byte) []byte {
	n := minStringLength + r.intn(maxLength-minStringLength)
	start := len(dst)
	for ; n > 0; n-- {
		if r.intn(13) == 0 {
			dst = append(dst, special)
		} else {
			dst = append(dst, byte('a'+r.intn(26)))
		}
	}
	s := dst[start:]
	lead := 0
	for lead < len(s) && s[lead] <= ' ' {
		lead++
	}
	end := len(s)
	for end > lead && s[end-1] <= ' ' {
		end--
	}
	copy(s, s[lead:end])
	return dst[:start+end-lead]
}

// appendExactString is the reference's nextExactString: n characters, six
// from each random int. Like the reference it takes Java's signed
// remainder, so besides a-z it yields the characters 'H' to '`'.
func appendExactString(dst []byte, r *javaRandom, n int) []byte {
	var rnd, left int32
	for ; n > 0; n-- {
		if left == 0 {
			rnd, left = r.nextInt(), 6
		}
		dst = append(dst, byte('a'+rnd%26))
		rnd /= 26
		left--
	}
	return dst
}

// baseURL is the reference's getBaseUrl.
func baseURL(r *javaRandom) string {
	b := make([]byte, 0, 64)
	b = append(b, "https://www.nexmark.com/"...)
	for range 3 {
		b = appendString(b, r, 5, '_')
		b = append(b, '/')
	}
	b = append(b, "item.htm?query=1"...)
	return string(b)
}
