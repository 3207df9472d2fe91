// Package nexmark generates the Nexmark benchmark's auction events
// (persons, auctions and bids), a Go port of the generator of the
// nexmark/nexmark project that Flink's Nexmark results are measured with
// (GeneratorConfig, NexmarkGenerator and the Person, Auction, Bid, Price
// and Strings generators).
//
// What follows the reference:
//
//   - The event mix by event id (person.proportion, auction.proportion,
//     bid.proportion; 1:3:46), person and auction ids counted from 1000,
//     categories from 10, log-uniform prices, hot auctions, sellers,
//     bidders and channels with the reference's ratios, the reference's US
//     states, cities, names, e-mail and credit-card shapes, channel names
//     and url shapes, auction expiry and reserve, and extra padding each
//     kind of event to its average size (200/500/100 bytes).
//   - The timeline: event n is stamped baseTime + n*1e6/first-event.rate
//     µs (truncated to ms), with the reference's out-of-order groups; the
//     numbering of its table source (first event id 1, first event number
//     1), so the first event is an auction with id 1001.
//   - The random draws: each event uses a java.util.Random seeded with its
//     event id, reproduced bit for bit, and draws in the reference's
//     order, so fields match the reference's model generators run with
//     such a Random (checked against the JVM for 200,000 events). Quirks
//     are kept: a bidder id is offset by 1000 twice, and extra may hold
//     the characters 'H' to '`' besides a-z.
//
// Where it differs, and why: the reference's current generator draws from
// one unseeded Random and builds channel urls from unseeded ones, so its
// output is not reproducible; here event i is a pure function of the
// configuration and i (Seed varies it), and urls come from seeded draws.
// extra's length is drawn as the reference draws it, but its text is a
// slice of one shared block of random text written with the reference's
// algorithm, so that generating a bid allocates nothing. The reference
// gives each parallel subtask its own id range and timeline; here event i
// is the same at any parallelism (the reference's output at parallelism
// 1), and subtasks share the index space (see Source).
//
// A job's user must:
//
//  1. Build a Config (DefaultConfig, or ParseOptions from a CREATE TABLE
//     ... WITH clause) and a Source from it, once per job.
//  2. Read it with clink.FromSource; each record carries its event time
//     (dateTime in ms), ready for watermarks.
//  3. Fix 'base-time' if two runs must produce identical events; otherwise
//     the timeline starts at the wall clock when the source is created,
//     and a restored job continues the timeline its checkpoint recorded.
//
// See docs/nexmark.md for the options and the benchmark command.
package nexmark
