package nexmark

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The reference's id bases: ids start there so that queries find matches
// even on small runs.
const (
	FirstPersonID   = 1000
	FirstAuctionID  = 1000
	FirstCategoryID = 10
)

// Constants of the reference's model generators.
const (
	hotAuctionRatio  = 100 // a hot auction is the first of the last 100
	hotBidderRatio   = 100 // a hot bidder is the second of the last 100 people
	hotSellerRatio   = 100 // a hot seller is the first of the last 100 people
	hotChannelsRatio = 2   // 1 - 1/2 of bids come from a hot channel
	channelsNumber   = 10_000
	numCategories    = 5
	personIDLead     = 10
	auctionIDLead    = 10
	minStringLength  = 3
)

// Config holds the generator's parameters. The zero value is not valid;
// start from DefaultConfig or ParseOptions. Field comments name the
// connector option (Flink's nexmark connector's name) that sets each.
type Config struct {
	// FirstEventRate is the overall event rate in events per second
	// ('first-event.rate', default 10000). It sets the event-time spacing:
	// event n is stamped baseTime + n*1e6/FirstEventRate µs (rounded down
	// to ms), whatever the parallelism.
	FirstEventRate int
	// NextEventRate ('next-event.rate'), RateShape ('rate.shape': square
	// or sine) and RatePeriod ('rate.period') are accepted and validated,
	// but, as in the reference generator, do not change the timeline: its
	// inter-event delay is computed from FirstEventRate alone.
	NextEventRate int
	RateShape     string
	RatePeriod    time.Duration
	// RateLimited paces emission to the event-time spacing, so that the
	// source emits about FirstEventRate events per second in all
	// ('rate.limited' = true, or 'max-emit-speed' = false). The default
	// emits as fast as the job takes them.
	RateLimited bool
	// Events is the number of events; 0 means unbounded ('events.num').
	Events int64

	// PersonProportion, AuctionProportion and BidProportion are the
	// event mix by event id ('person.proportion', 'auction.proportion',
	// 'bid.proportion'; default 1:3:46).
	PersonProportion, AuctionProportion, BidProportion int
	// AvgPersonSize, AvgAuctionSize and AvgBidSize are the average sizes
	// in bytes that the extra field pads each event to ('person.avg-size',
	// 'auction.avg-size', 'bid.avg-size'; default 200, 500, 100; Flink
	// memory sizes such as "200b" or "1kb").
	AvgPersonSize, AvgAuctionSize, AvgBidSize int
	// HotAuctionRatio, HotBiddersRatio and HotSellersRatio: a bid goes to
	// a hot auction with probability 1-1/HotAuctionRatio, is by a hot
	// bidder with 1-1/HotBiddersRatio; an auction is by a hot seller with
	// 1-1/HotSellersRatio ('bid.hot-ratio.auctions' 2,
	// 'bid.hot-ratio.bidders' 4, 'auction.hot-ratio.sellers' 4).
	HotAuctionRatio, HotBiddersRatio, HotSellersRatio int

	// NumInFlightAuctions, NumActivePeople and OutOfOrderGroupSize are the
	// reference's NexmarkConfiguration fields that its connector does not
	// expose (default 100, 1000, 1). Events of one out-of-order group of
	// OutOfOrderGroupSize consecutive events carry shuffled event ids and
	// timestamps ('out-of-order-group.size' is a clink extension).
	NumInFlightAuctions int
	NumActivePeople     int
	OutOfOrderGroupSize int64

	// BaseTime is the event time of the timeline's start, in milliseconds
	// since the Unix epoch ('base-time', a clink extension: milliseconds
	// or an RFC 3339 time). 0, the default, takes the wall clock when the
	// source is created, as the reference does; a checkpoint keeps it, so
	// a restored job continues the same timeline.
	BaseTime int64
	// Seed is mixed into every event's random seed ('seed', a clink
	// extension, default 0: the reference's seeding by event id).
	Seed int64
}

// DefaultConfig returns the reference's defaults: 10000 events/s, 1:3:46,
// 200/500/100 bytes, unbounded, base time at creation.
func DefaultConfig() Config {
	return Config{
		FirstEventRate:      10000,
		NextEventRate:       10000,
		RateShape:           "square",
		RatePeriod:          600 * time.Second,
		PersonProportion:    1,
		AuctionProportion:   3,
		BidProportion:       46,
		AvgPersonSize:       200,
		AvgAuctionSize:      500,
		AvgBidSize:          100,
		HotAuctionRatio:     2,
		HotBiddersRatio:     4,
		HotSellersRatio:     4,
		NumInFlightAuctions: 100,
		NumActivePeople:     1000,
		OutOfOrderGroupSize: 1,
	}
}

// Validate checks the configuration; conflicting or out-of-range values
// are an error that names the option.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("'%s' must be positive, got %d", name, v))
		}
	}
	positive("first-event.rate", int64(c.FirstEventRate))
	positive("next-event.rate", int64(c.NextEventRate))
	if c.RateShape != "square" && c.RateShape != "sine" {
		errs = append(errs, fmt.Errorf("'rate.shape' must be square or sine, got %q", c.RateShape))
	}
	if c.RatePeriod < time.Second {
		errs = append(errs, fmt.Errorf("'rate.period' must be at least 1s, got %s", c.RatePeriod))
	}
	if c.Events < 0 {
		errs = append(errs, fmt.Errorf("'events.num' must not be negative, got %d", c.Events))
	}
	positive("person.proportion", int64(c.PersonProportion))
	positive("auction.proportion", int64(c.AuctionProportion))
	if c.BidProportion < 0 {
		errs = append(errs, fmt.Errorf("'bid.proportion' must not be negative, got %d", c.BidProportion))
	}
	positive("person.avg-size", int64(c.AvgPersonSize))
	positive("auction.avg-size", int64(c.AvgAuctionSize))
	positive("bid.avg-size", int64(c.AvgBidSize))
	for _, s := range []struct {
		name string
		v    int
	}{{"person.avg-size", c.AvgPersonSize}, {"auction.avg-size", c.AvgAuctionSize}, {"bid.avg-size", c.AvgBidSize}} {
		if s.v > maxAvgSize {
			errs = append(errs, fmt.Errorf("'%s' must be at most %d bytes, got %d", s.name, maxAvgSize, s.v))
		}
	}
	positive("bid.hot-ratio.auctions", int64(c.HotAuctionRatio))
	positive("bid.hot-ratio.bidders", int64(c.HotBiddersRatio))
	positive("auction.hot-ratio.sellers", int64(c.HotSellersRatio))
	positive("NumInFlightAuctions", int64(c.NumInFlightAuctions))
	positive("NumActivePeople", int64(c.NumActivePeople))
	positive("out-of-order-group.size", c.OutOfOrderGroupSize)
	if c.BaseTime < 0 {
		errs = append(errs, fmt.Errorf("'base-time' must not be before 1970, got %d", c.BaseTime))
	}
	return errors.Join(errs...)
}

// maxAvgSize bounds the average sizes so that extra fits the shared pool.
const maxAvgSize = 1 << 20

func (c *Config) totalProportion() int64 {
	return int64(c.PersonProportion + c.AuctionProportion + c.BidProportion)
}

// optionKeys are the connector options ParseOptions knows, sorted.
var optionKeys = []string{
	"auction.avg-size", "auction.hot-ratio.sellers", "auction.proportion",
	"base-time", "bid.avg-size", "bid.hot-ratio.auctions", "bid.hot-ratio.bidders",
	"bid.proportion", "connector", "events.num", "first-event.rate", "max-emit-speed",
	"next-event.rate", "out-of-order-group.size", "person.avg-size", "person.proportion",
	"rate.limited", "rate.period", "rate.shape", "seed",
}

// ParseOptions builds a Config from connector options as a CREATE TABLE
// ... WITH (...) clause gives them (Flink's nexmark connector's keys;
// DefaultConfig for absent ones). 'connector' is ignored. An unknown key
// or a malformed value is an error naming the key.
func ParseOptions(opts map[string]string) (Config, error) {
	c := DefaultConfig()
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		v := strings.TrimSpace(opts[k])
		var err error
		switch k {
		case "connector":
		case "first-event.rate":
			c.FirstEventRate, err = parseInt(v)
		case "next-event.rate":
			c.NextEventRate, err = parseInt(v)
		case "rate.shape":
			c.RateShape = strings.ToLower(v)
		case "rate.period":
			c.RatePeriod, err = parseDuration(v)
		case "rate.limited":
			c.RateLimited, err = strconv.ParseBool(v)
		case "max-emit-speed":
			var b bool
			b, err = strconv.ParseBool(v)
			if err == nil && !b {
				c.RateLimited = true
			}
		case "events.num":
			c.Events, err = parseInt64(v)
		case "person.proportion":
			c.PersonProportion, err = parseInt(v)
		case "auction.proportion":
			c.AuctionProportion, err = parseInt(v)
		case "bid.proportion":
			c.BidProportion, err = parseInt(v)
		case "person.avg-size":
			c.AvgPersonSize, err = parseMemorySize(v)
		case "auction.avg-size":
			c.AvgAuctionSize, err = parseMemorySize(v)
		case "bid.avg-size":
			c.AvgBidSize, err = parseMemorySize(v)
		case "bid.hot-ratio.auctions":
			c.HotAuctionRatio, err = parseInt(v)
		case "bid.hot-ratio.bidders":
			c.HotBiddersRatio, err = parseInt(v)
		case "auction.hot-ratio.sellers":
			c.HotSellersRatio, err = parseInt(v)
		case "out-of-order-group.size":
			c.OutOfOrderGroupSize, err = parseInt64(v)
		case "base-time":
			c.BaseTime, err = parseBaseTime(v)
		case "seed":
			c.Seed, err = parseInt64(v)
		default:
			err = fmt.Errorf("unknown option (known: %s)", strings.Join(optionKeys, ", "))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("nexmark option '%s' = '%s': %w", k, opts[k], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func parseInt64(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a 64-bit integer")
	}
	return v, nil
}

func parseInt(s string) (int, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errors.New("not a 32-bit integer")
	}
	return int(v), nil
}

// parseMemorySize reads a Flink memory size: a number with an optional
// unit (b, k/kb, m/mb, g/gb; binary multiples, as Flink's MemorySize).
func parseMemorySize(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, errors.New("not a memory size such as 200b or 1kb")
	}
	var mult int64
	switch unit {
	case "", "b", "bytes":
		mult = 1
	case "k", "kb", "kibibytes":
		mult = 1 << 10
	case "m", "mb", "mebibytes":
		mult = 1 << 20
	case "g", "gb", "gibibytes":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("unknown memory unit %q (want b, kb, mb or gb)", unit)
	}
	if n > math.MaxInt32/mult {
		return 0, errors.New("too large")
	}
	return int(n * mult), nil
}

// parseDuration reads a Flink duration ("600 s", "10 min", "1h") or a Go
// one ("10m30s"); a bare number is milliseconds, as in Flink.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	t := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, errors.New("not a duration such as 600 s or 10 min")
	}
	units := map[string]time.Duration{
		"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
		"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
		"min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
		"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	}
	u, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("unknown duration unit %q", unit)
	}
	return time.Duration(n) * u, nil
}

// parseBaseTime reads milliseconds since the epoch or an RFC 3339 time.
func parseBaseTime(s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("not milliseconds since 1970 nor an RFC 3339 time")
	}
	return t.UnixMilli(), nil
}
