package nexmark

import "time"

// EventType says which of an Event's parts is set. Its values are the
// event_type column of the reference's table schema.
type EventType int8

// The event types, numbered as the reference's event_type column.
const (
	PersonEvent  EventType = 0
	AuctionEvent EventType = 1
	BidEvent     EventType = 2
)

func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return "unknown"
}

// Times in the model are milliseconds since the Unix epoch (UTC), the
// TIMESTAMP(3) columns of the reference's schema; Millis converts one to a
// time.Time.
func Millis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// Person is a new person registering (the reference's Person).
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64 // ms since the epoch
	Extra        string
}

// Auction is a new auction (the reference's Auction).
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64 // ms since the epoch
	Expires     int64 // ms since the epoch
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid on an auction (the reference's Bid).
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64 // ms since the epoch
	Extra    string
}

// Event is one generated event: Type says which part is set; the others
// are zero. The parts are values, not pointers, so that generating a bid
// allocates nothing; an Event is about 300 bytes.
type Event struct {
	Type    EventType
	Person  Person
	Auction Auction
	Bid     Bid
}

// DateTime is the event time of the part that is set, in milliseconds
// (the dateTime column the reference's DDL computes with a CASE).
func (e Event) DateTime() int64 {
	switch e.Type {
	case PersonEvent:
		return e.Person.DateTime
	case AuctionEvent:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}
