package nexmark_test

import (
	"cmp"
	"fmt"
	"slices"

	gen "github.com/clinkstream/clink/connectors/nexmark"
)

// The references of the stateful queries: joins, window aggregates, Top-N,
// deduplication and session windows, computed from the events with maps and
// sorting, as Flink defines each query's result.
//
// A row behind the watermark (`dateTime` - 4 s) is dropped by Flink's
// window aggregates, window joins and session windows. No row is late in
// the test's events, so these references drop nothing: the generator
// shuffles the times of each group of testOutOfOrder events, and each
// source subtask emits its events in index order, so a subtask's watermark
// is at most the highest time of the events before in index order, minus
// 4 s, and TestQueriesMatchReference checks that every event is later than
// that (checkNoneLate). It checks too that no two events have the same
// time, which decides q9's and q18's order alone.

// checkNoneLate is the precondition of the references: every event is
// less than 4 s behind the events before it, and no two have the same
// time.
func checkNoneLate(evs []gen.Event) error {
	const bound = 4_000 // WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
	seen := map[int64]int{}
	var highest int64
	for i, e := range evs {
		t := e.DateTime()
		if i > 0 && t <= highest-bound {
			return fmt.Errorf("event %d at %s is behind the watermark %s: the references assume no late rows", i, ts(t), ts(highest-bound))
		}
		if j, ok := seen[t]; ok {
			return fmt.Errorf("events %d and %d have the same time %s: the references assume unique times", j, i, ts(t))
		}
		seen[t] = i
		highest = max(highest, t)
	}
	return nil
}

func persons(evs []gen.Event) []gen.Person {
	var out []gen.Person
	for _, e := range evs {
		if e.Type == gen.PersonEvent {
			out = append(out, e.Person)
		}
	}
	return out
}

func auctions(evs []gen.Event) []gen.Auction {
	var out []gen.Auction
	for _, e := range evs {
		if e.Type == gen.AuctionEvent {
			out = append(out, e.Auction)
		}
	}
	return out
}

// bidRow is a bid's columns in the order of the bid view (all of them).
func bidRow(b gen.Bid, more ...any) string {
	return row(append([]any{b.Auction, b.Bidder, b.Price, b.Channel, b.URL, ts(b.DateTime), b.Extra}, more...)...)
}

// floorTo is the start of the window of size that holds t (windows from
// the epoch; all the test's times are positive).
func floorTo(t, size int64) int64 { return t - t%size }

// q3: auctions of category 10 joined with their sellers from Oregon,
// Idaho or California (a regular inner join: every matching pair, whatever
// arrives first).
func q3(evs []gen.Event) (out []string) {
	sellers := map[int64][]gen.Person{}
	for _, p := range persons(evs) {
		if p.State == "OR" || p.State == "ID" || p.State == "CA" {
			sellers[p.ID] = append(sellers[p.ID], p)
		}
	}
	for _, a := range auctions(evs) {
		if a.Category != 10 {
			continue
		}
		for _, p := range sellers[a.Seller] {
			out = append(out, row(p.Name, p.City, p.State, a.ID))
		}
	}
	return out
}

// bidsDuring are the bids on each auction made between its start and its
// expiry, both included (q4 and q9's join).
func bidsDuring(evs []gen.Event) map[int64][]gen.Bid {
	byAuction := map[int64][]gen.Bid{}
	for _, b := range bids(evs) {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	out := map[int64][]gen.Bid{}
	for _, a := range auctions(evs) {
		for _, b := range byAuction[a.ID] {
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				out[a.ID] = append(out[a.ID], b)
			}
		}
	}
	return out
}

// q4: per category, the average of its auctions' winning (highest) bids
// made while the auction ran. AVG of BIGINT is a BIGINT, the sum divided
// by the count, truncated.
func q4(evs []gen.Event) (out []string) {
	during := bidsDuring(evs)
	type acc struct{ sum, n int64 }
	cats := map[int64]*acc{}
	for _, a := range auctions(evs) {
		bs := during[a.ID]
		if len(bs) == 0 {
			continue
		}
		best := slices.MaxFunc(bs, func(x, y gen.Bid) int { return cmp.Compare(x.Price, y.Price) })
		c := cats[a.Category]
		if c == nil {
			c = &acc{}
			cats[a.Category] = c
		}
		c.sum += best.Price
		c.n++
	}
	for cat, c := range cats {
		out = append(out, row(cat, c.sum/c.n))
	}
	return out
}

// q5: per hopping window (10 s, every 2 s), the auctions with the most
// bids, with their count; the same (auction, count) of several windows is
// several rows.
func q5(evs []gen.Event) (out []string) {
	const size, slide = 10_000, 2_000
	counts := map[[2]int64]int64{} // window start, auction
	for _, b := range bids(evs) {
		for s := floorTo(b.DateTime, slide); s > b.DateTime-size; s -= slide {
			counts[[2]int64{s, b.Auction}]++
		}
	}
	most := map[int64]int64{}
	for k, n := range counts {
		most[k[0]] = max(most[k[0]], n)
	}
	for k, n := range counts {
		if n >= most[k[0]] {
			out = append(out, row(k[1], n))
		}
	}
	return out
}

// q7: the bids whose price is the highest of a 10 s tumbling window
// [s, e) and that were made between e - 10 s and e, both included (a bid
// at exactly e also matches the window that ends there).
func q7(evs []gen.Event) (out []string) {
	const size = 10_000
	bs := bids(evs)
	highest := map[int64]int64{} // window end
	for _, b := range bs {
		e := floorTo(b.DateTime, size) + size
		if p, ok := highest[e]; !ok || b.Price > p {
			highest[e] = b.Price
		}
	}
	for _, b := range bs {
		// The windows whose end e has e-10s <= dateTime <= e.
		for e := floorTo(b.DateTime, size) + size; e >= b.DateTime && e-size <= b.DateTime; e -= size {
			if p, ok := highest[e]; ok && p == b.Price {
				out = append(out, row(b.Auction, b.Price, b.Bidder, ts(b.DateTime), b.Extra))
			}
		}
	}
	return out
}

// q8: the people who opened an auction in the 10 s tumbling window in
// which they registered, with the window's start.
func q8(evs []gen.Event) (out []string) {
	const size = 10_000
	sold := map[[2]int64]bool{} // seller, window start
	for _, a := range auctions(evs) {
		sold[[2]int64{a.Seller, floorTo(a.DateTime, size)}] = true
	}
	people := map[string]bool{} // GROUP BY id, name, window
	for _, p := range persons(evs) {
		s := floorTo(p.DateTime, size)
		if sold[[2]int64{p.ID, s}] {
			people[row(p.ID, p.Name, ts(s))] = true
		}
	}
	for r := range people {
		out = append(out, r)
	}
	return out
}

// q9: each auction with its winning bid among those made while it ran:
// the highest price, the earliest of equal ones.
func q9(evs []gen.Event) (out []string) {
	during := bidsDuring(evs)
	for _, a := range auctions(evs) {
		bs := during[a.ID]
		if len(bs) == 0 {
			continue
		}
		b := slices.MinFunc(bs, func(x, y gen.Bid) int {
			return cmp.Or(cmp.Compare(y.Price, x.Price), cmp.Compare(x.DateTime, y.DateTime))
		})
		out = append(out, row(a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, ts(a.DateTime), ts(a.Expires), a.Seller, a.Category, a.Extra,
			b.Auction, b.Bidder, b.Price, ts(b.DateTime), b.Extra))
	}
	return out
}

// q11: each bidder's sessions, bids no more than 10 s apart (windows
// [t, t+10s) that touch merge, as in Flink), with the bid count, the first
// bid's time and the last one's plus 10 s.
func q11(evs []gen.Event) (out []string) {
	const gap = 10_000
	times := map[int64][]int64{}
	for _, b := range bids(evs) {
		times[b.Bidder] = append(times[b.Bidder], b.DateTime)
	}
	for bidder, bt := range times {
		slices.Sort(bt)
		start, last, n := bt[0], bt[0], 0
		for _, t := range bt {
			if t > last+gap {
				out = append(out, row(bidder, n, ts(start), ts(last+gap)))
				start, n = t, 0
			}
			last = t
			n++
		}
		out = append(out, row(bidder, n, ts(start), ts(last+gap)))
	}
	return out
}

// q18: each bidder's latest bid on each auction.
func q18(evs []gen.Event) (out []string) {
	last := map[[2]int64]gen.Bid{}
	for _, b := range bids(evs) {
		k := [2]int64{b.Bidder, b.Auction}
		if l, ok := last[k]; !ok || b.DateTime > l.DateTime {
			last[k] = b
		}
	}
	for _, b := range last {
		out = append(out, bidRow(b))
	}
	return out
}

// q19Top are each auction's bids by price, highest first, and of equal
// prices the earlier bid first.
func q19Top(evs []gen.Event) map[int64][]gen.Bid {
	by := map[int64][]gen.Bid{}
	for _, b := range bids(evs) {
		by[b.Auction] = append(by[b.Auction], b)
	}
	for _, bs := range by {
		slices.SortStableFunc(bs, func(x, y gen.Bid) int { return cmp.Compare(y.Price, x.Price) })
	}
	return by
}

// q19: each auction's 10 highest bids with their row number.
func q19(evs []gen.Event) (out []string) {
	for _, bs := range q19Top(evs) {
		for i, b := range bs[:min(10, len(bs))] {
			out = append(out, bidRow(b, i+1))
		}
	}
	return out
}

// q19Ties is q19's precondition: ROW_NUMBER numbers equal prices of an
// auction in the order the bids arrive, and bids of one auction from two
// source subtasks arrive in either order, so the result is only certain
// when no two of an auction's 11 highest bids have the same price. It
// holds for the test's events; other events may need another seed.
func q19Ties(evs []gen.Event) error {
	for a, bs := range q19Top(evs) {
		top := bs[:min(11, len(bs))]
		for i := 1; i < len(top); i++ {
			if top[i].Price == top[i-1].Price {
				return fmt.Errorf("auction %d has two bids of %d among its 11 highest: q19's result depends on the order they arrive in", a, top[i].Price)
			}
		}
	}
	return nil
}

// q20: bids joined with their auction, of category 10.
func q20(evs []gen.Event) (out []string) {
	byID := map[int64][]gen.Auction{}
	for _, a := range auctions(evs) {
		if a.Category == 10 {
			byID[a.ID] = append(byID[a.ID], a)
		}
	}
	for _, b := range bids(evs) {
		for _, a := range byID[b.Auction] {
			out = append(out, row(b.Auction, b.Bidder, b.Price, b.Channel, b.URL, ts(b.DateTime), b.Extra,
				a.ItemName, a.Description, a.InitialBid, a.Reserve, ts(a.DateTime), ts(a.Expires), a.Seller, a.Category, a.Extra))
		}
	}
	return out
}
