package statetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/clinkstream/clink/state"
)

const (
	ttlMaxP = 16
	ttl     = 100 // milliseconds
	// t0 is where the fake clocks start: a time well away from 0, as wall
	// clock times are.
	t0 = int64(1_700_000_000_000)
)

// ttlTables returns the fixture on a new backend whose states expire ttl
// milliseconds after their last write on a fake clock at t0.
func (s *suite) ttlTables(t *testing.T) (*tables, *fakeClock) {
	t.Helper()
	clock := newFakeClock(t0)
	tb := newTables(s.open(t, fullRange(ttlMaxP), ttlMaxP), fullRange(ttlMaxP), ttlMaxP,
		state.WithTTL(ttl*time.Millisecond), state.WithClock(clock.now))
	tb.register(t, allTables...)
	return tb, clock
}

// ttlWrite writes v to entry i of table: Put for value and map states (to
// the user key u<v>), Add for the others.
func ttlWrite(tb *tables, table string, i int, v int64) {
	switch table {
	case tValue:
		tb.value.Put(valueKey(i), v)
	case tList:
		tb.list.Add(listKey(i), fmt.Sprint(v))
	case tMap:
		tb.mapS.Put(mapKey(i), fmt.Sprint("u", v), v)
	case tReduce:
		tb.reduce.Add(reduceKey(i), v)
	case tAgg:
		tb.agg.Add(aggKey(i), v)
	}
}

// rendered returns how an entry of table reads after ttlWrite of vs into
// it, with no expiry in between.
func rendered(table string, vs ...int64) string {
	m := newModel()
	for _, v := range vs {
		switch table {
		case tValue:
			m.value[0] = v
		case tList:
			m.list[0] = append(m.list[0], fmt.Sprint(v))
		case tMap:
			if m.mp[0] == nil {
				m.mp[0] = map[string]int64{}
			}
			m.mp[0][fmt.Sprint("u", v)] = v
		case tReduce:
			m.reduce[0] += v
		case tAgg:
			m.agg[0] = average{}.Add(m.agg[0], v)
		}
	}
	return m.contents(nil, table)[entry{table, 0}]
}

// expectEntry fails the test unless entry i of table reads as the writes
// vs made it, or is absent when vs is empty.
func expectEntry(t *testing.T, tb *tables, clock *fakeClock, table string, i int, vs ...int64) {
	t.Helper()
	got, ok := tb.get(table, i)
	switch {
	case len(vs) == 0 && ok:
		t.Errorf("%s[%s] at t0%+dms: got %s, want it expired", table, tableKey(table, i), clock.now()-t0, got)
	case len(vs) > 0 && !ok:
		t.Errorf("%s[%s] at t0%+dms: expired, want %s", table, tableKey(table, i), clock.now()-t0, rendered(table, vs...))
	case len(vs) > 0 && got != rendered(table, vs...):
		t.Errorf("%s[%s] at t0%+dms: got %s, want %s", table, tableKey(table, i), clock.now()-t0, got, rendered(table, vs...))
	}
}

func (s *suite) testTTL(t *testing.T) {
	t.Run("ExpiresAfterLastWrite", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			clock.set(t0)
			ttlWrite(tb, table, 0, 1)
			clock.set(t0 + 50)
			ttlWrite(tb, table, 1, 2)
			clock.set(t0 + ttl - 1)
			expectEntry(t, tb, clock, table, 0, 1)
			clock.set(t0 + ttl)
			expectEntry(t, tb, clock, table, 0)
			expectEntry(t, tb, clock, table, 1, 2)
			clock.set(t0 + 50 + ttl)
			expectEntry(t, tb, clock, table, 1)
			// An expired entry stays expired.
			clock.set(t0 + 10*ttl)
			expectEntry(t, tb, clock, table, 0)
		}
		visited := 0
		tb.value.Range(func(string, int64) bool { visited++; return true })
		if visited != 0 {
			t.Errorf("Range visited %d expired entries", visited)
		}
	})

	t.Run("WriteRefreshes", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			clock.set(t0)
			ttlWrite(tb, table, 2, 1)
			clock.set(t0 + 90)
			ttlWrite(tb, table, 2, 2)
			clock.set(t0 + 90 + ttl - 1)
			expectEntry(t, tb, clock, table, 2, 1, 2)
			clock.set(t0 + 90 + ttl)
			expectEntry(t, tb, clock, table, 2)
		}
	})

	t.Run("ReadDoesNotRefresh", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			clock.set(t0)
			ttlWrite(tb, table, 3, 1)
			for _, at := range []int64{10, 50, ttl - 1} {
				clock.set(t0 + at)
				expectEntry(t, tb, clock, table, 3, 1)
			}
			clock.set(t0 + ttl)
			expectEntry(t, tb, clock, table, 3)
		}
	})

	t.Run("WriteAfterExpiryStartsAfresh", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			clock.set(t0)
			ttlWrite(tb, table, 4, 1)
			ttlWrite(tb, table, 4, 2)
			clock.set(t0 + ttl)
			// Nothing of the expired entry is folded into, appended to or
			// kept beside the new write.
			ttlWrite(tb, table, 4, 5)
			expectEntry(t, tb, clock, table, 4, 5)
			clock.set(t0 + 2*ttl - 1)
			expectEntry(t, tb, clock, table, 4, 5)
			clock.set(t0 + 2*ttl)
			expectEntry(t, tb, clock, table, 4)
		}
	})

	t.Run("ExpiredNotPersisted", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			for i := 10; i < 20; i++ {
				ttlWrite(tb, table, i, int64(i))
			}
		}
		clock.set(t0 + 60)
		for _, table := range allTables {
			for i := 20; i < 30; i++ {
				ttlWrite(tb, table, i, int64(i))
			}
		}
		// Entries 10..19 expire now, before the capture, without being
		// read.
		clock.set(t0 + ttl)
		groups := persist(t, capture(t, tb.b), tb.rng)
		// Restored on a clock at which they would be live, had they been
		// persisted with their write time.
		clock2 := newFakeClock(t0 + 60)
		r := s.restore(t, tb.rng, ttlMaxP, [][]state.KeyGroupData{groups},
			[]state.StateOption{state.WithTTL(ttl * time.Millisecond), state.WithClock(clock2.now)}, allTables...)
		for _, table := range allTables {
			for i := 10; i < 20; i++ {
				expectEntry(t, r, clock2, table, i)
			}
			for i := 20; i < 30; i++ {
				expectEntry(t, r, clock2, table, i, int64(i))
			}
		}
	})

	t.Run("RestoreKeepsWriteTime", func(t *testing.T) {
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			ttlWrite(tb, table, 30, 1)
		}
		clock.set(t0 + 50)
		for _, table := range allTables {
			ttlWrite(tb, table, 31, 2)
			ttlWrite(tb, table, 31, 3)
		}
		groups := persist(t, capture(t, tb.b), tb.rng)
		clock2 := newFakeClock(t0 + 50)
		r := s.restore(t, tb.rng, ttlMaxP, [][]state.KeyGroupData{groups},
			[]state.StateOption{state.WithTTL(ttl * time.Millisecond), state.WithClock(clock2.now)}, allTables...)
		for _, table := range allTables {
			clock2.set(t0 + ttl - 1)
			expectEntry(t, r, clock2, table, 30, 1)
			expectEntry(t, r, clock2, table, 31, 2, 3)
			clock2.set(t0 + ttl)
			expectEntry(t, r, clock2, table, 30)
			expectEntry(t, r, clock2, table, 31, 2, 3)
			clock2.set(t0 + 50 + ttl - 1)
			expectEntry(t, r, clock2, table, 31, 2, 3)
			clock2.set(t0 + 50 + ttl)
			expectEntry(t, r, clock2, table, 31)
		}
	})

	t.Run("RestoredLate", func(t *testing.T) {
		// Restored after the TTL has passed, nothing is live.
		tb, clock := s.ttlTables(t)
		for _, table := range allTables {
			ttlWrite(tb, table, 40, 1)
		}
		clock.set(t0 + ttl - 1)
		groups := persist(t, capture(t, tb.b), tb.rng)
		clock2 := newFakeClock(t0 + ttl)
		r := s.restore(t, tb.rng, ttlMaxP, [][]state.KeyGroupData{groups},
			[]state.StateOption{state.WithTTL(ttl * time.Millisecond), state.WithClock(clock2.now)}, allTables...)
		for _, table := range allTables {
			expectEntry(t, r, clock2, table, 40)
		}
	})
}
