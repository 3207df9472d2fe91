package nexmark_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/connectors/filesystem"
	gen "github.com/clinkstream/clink/connectors/nexmark"
	"github.com/clinkstream/clink/examples/nexmark"
	"github.com/clinkstream/clink/sql"
)

// unsupported are the queries that do not plan yet, with a part of the
// planner's error that says why. A query here that plans fails
// TestQueriesPlan, so that it gets a reference and this list stays true.
var unsupported = map[string]string{
	// The OVER aggregate's input is the updating output of a Top-1 by
	// price, and OVER aggregates take insert-only input (in Flink too,
	// whose q6 is marked as not supported for this reason).
	"q6": "OVER aggregates take an insert-only input",
}

// testEvents and the timeline of the correctness runs: 10,000 events at
// 100 per second of event time from 23:59:40, so that the run crosses
// minutes and a day, out of order in groups of testOutOfOrder events (3 s
// of event time, less than the watermark's 4 s: see checkNoneLate).
const (
	testEvents     = 10_000
	testRate       = 100
	testBaseTime   = 1436918380000 // 2015-07-14 23:59:40 UTC
	testOutOfOrder = 300
)

func params(t *testing.T) nexmark.Params {
	dir := t.TempDir()
	side := filepath.Join(dir, "side_input.csv")
	return nexmark.Params{Events: testEvents, Rate: testRate, BaseTime: testBaseTime, OutputDir: filepath.Join(dir, "out"), SideInput: side}
}

func TestQueriesPlan(t *testing.T) {
	qs := nexmark.Queries()
	if len(qs) != 23 || qs[0] != "q0" || qs[22] != "q22" {
		t.Fatalf("queries = %v, want q0..q22", qs)
	}
	for _, q := range qs {
		t.Run(q, func(t *testing.T) {
			script, err := nexmark.Script(q, params(t))
			if err != nil {
				t.Fatal(err)
			}
			_, err = sql.Prepare(script, sql.Options{Stdout: io.Discard, Functions: nexmark.Functions()})
			why, skip := unsupported[q]
			switch {
			case skip && err == nil:
				t.Fatalf("%s plans now: remove it from the unsupported list and give it a reference", q)
			case skip && !strings.Contains(err.Error(), why):
				t.Fatalf("%s fails for another reason than %q: %v", q, why, err)
			case !skip && err != nil:
				t.Fatalf("%s: %v", q, err)
			case !skip && references[q] == nil && structural[q] == nil:
				t.Fatalf("%s plans but has no reference in this test", q)
			}
		})
	}
}

// events generates the test's events with the generator the connector
// reads, configured as ddl.sql configures it.
func events(t *testing.T) []gen.Event {
	t.Helper()
	cfg, err := gen.ParseOptions(map[string]string{
		"events.num": strconv.Itoa(testEvents), "first-event.rate": strconv.Itoa(testRate),
		"next-event.rate": strconv.Itoa(testRate), "base-time": strconv.Itoa(testBaseTime),
		"out-of-order-group.size": strconv.Itoa(testOutOfOrder),
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gen.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]gen.Event, testEvents)
	for i := range evs {
		g.Fill(int64(i), &evs[i])
	}
	return evs
}

func bids(evs []gen.Event) []gen.Bid {
	var out []gen.Bid
	for _, e := range evs {
		if e.Type == gen.BidEvent {
			out = append(out, e.Bid)
		}
	}
	return out
}

// Formatting of reference values as Flink prints them, written
// independently of sql/types.
func ts(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") }
func day(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02")
}
func minute(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04") }

// euros is 0.908 * price as DECIMAL(23, 3).
func euros(price int64) string { p := price * 908; return fmt.Sprintf("%d.%03d", p/1000, p%1000) }

func row(vals ...any) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			s[i] = "NULL"
		} else {
			s[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// references compute each runnable query's final result from the events,
// as a multiset of printed rows.
var references = map[string]func([]gen.Event) []string{
	"q0": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			out = append(out, row(b.Auction, b.Bidder, b.Price, ts(b.DateTime), b.Extra))
		}
		return out
	},
	"q1": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			out = append(out, row(b.Auction, b.Bidder, euros(b.Price), ts(b.DateTime), b.Extra))
		}
		return out
	},
	"q2": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			if b.Auction%123 == 0 {
				out = append(out, row(b.Auction, b.Price))
			}
		}
		return out
	},
	"q3": q3,
	"q4": q4,
	"q5": q5,
	"q7": q7,
	"q8": q8,
	"q9": q9,
	"q10": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			out = append(out, row(b.Auction, b.Bidder, b.Price, ts(b.DateTime), b.Extra, day(b.DateTime), minute(b.DateTime)))
		}
		return out
	},
	"q11": q11,
	"q13": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			out = append(out, row(b.Auction, b.Bidder, b.Price, ts(b.DateTime), sideValue(b.Auction%10000)))
		}
		return out
	},
	"q14": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			if p := b.Price * 908; p <= 1_000_000_000 || p >= 50_000_000_000 {
				continue
			}
			h := time.UnixMilli(b.DateTime).UTC().Hour()
			kind := "otherTime"
			if h >= 8 && h <= 18 {
				kind = "dayTime"
			} else if h <= 6 || h >= 20 {
				kind = "nightTime"
			}
			out = append(out, row(b.Auction, b.Bidder, euros(b.Price), kind, ts(b.DateTime), b.Extra, strings.Count(b.Extra, "c")))
		}
		return out
	},
	"q15": func(evs []gen.Event) []string { return bidStats(evs, false) },
	"q16": func(evs []gen.Event) []string { return bidStats(evs, true) },
	"q17": func(evs []gen.Event) (out []string) {
		type acc struct{ n, r1, r2, r3, minP, maxP, sum int64 }
		groups := map[[2]string]*acc{}
		for _, b := range bids(evs) {
			k := [2]string{strconv.FormatInt(b.Auction, 10), day(b.DateTime)}
			a := groups[k]
			if a == nil {
				a = &acc{minP: b.Price, maxP: b.Price}
				groups[k] = a
			}
			a.n++
			a.sum += b.Price
			a.minP, a.maxP = min(a.minP, b.Price), max(a.maxP, b.Price)
			switch {
			case b.Price < 10_000:
				a.r1++
			case b.Price < 1_000_000:
				a.r2++
			default:
				a.r3++
			}
		}
		for k, a := range groups {
			out = append(out, row(k[0], k[1], a.n, a.r1, a.r2, a.r3, a.minP, a.maxP, a.sum/a.n, a.sum))
		}
		return out
	},
	"q18": q18,
	"q19": q19,
	"q20": q20,
	"q21": func(evs []gen.Event) (out []string) {
		known := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
		for _, b := range bids(evs) {
			id, isKnown := known[strings.ToLower(b.Channel)]
			fromURL, inURL := channelID(b.URL)
			switch {
			case isKnown:
				out = append(out, row(b.Auction, b.Bidder, b.Price, b.Channel, id))
			case inURL:
				out = append(out, row(b.Auction, b.Bidder, b.Price, b.Channel, fromURL))
			}
		}
		return out
	},
	"q22": func(evs []gen.Event) (out []string) {
		for _, b := range bids(evs) {
			parts := strings.Split(b.URL, "/")
			dir := func(i int) any {
				if i < len(parts) {
					return parts[i]
				}
				return nil
			}
			out = append(out, row(b.Auction, b.Bidder, b.Price, b.Channel, dir(3), dir(4), dir(5)))
		}
		return out
	},
}

// preconditions say whether a reference's result is certain for the
// events: a query whose result depends on the order rows arrive in only
// has one when no such choice arises.
var preconditions = map[string]func([]gen.Event) error{"q19": q19Ties}

// channelID finds the value of the first channel_id parameter at the start
// of url or after an '&' (REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)).
func channelID(url string) (string, bool) {
	for i := 0; i < len(url); i++ {
		if (i == 0 || url[i-1] == '&') && strings.HasPrefix(url[i:], "channel_id=") {
			v := url[i+len("channel_id="):]
			if j := strings.IndexByte(v, '&'); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
	}
	return "", false
}

// bidStats is q15 (per day) and, with byChannel, q16 (per channel and
// day, with the latest minute).
func bidStats(evs []gen.Event, byChannel bool) (out []string) {
	type acc struct {
		n        [4]int64 // all, rank 1..3
		bidders  [4]map[int64]bool
		auctions [4]map[int64]bool
		minute   string
	}
	groups := map[[2]string]*acc{}
	for _, b := range bids(evs) {
		k := [2]string{"", day(b.DateTime)}
		if byChannel {
			k[0] = b.Channel
		}
		a := groups[k]
		if a == nil {
			a = &acc{}
			for i := range 4 {
				a.bidders[i], a.auctions[i] = map[int64]bool{}, map[int64]bool{}
			}
			groups[k] = a
		}
		r := 3
		if b.Price < 10_000 {
			r = 1
		} else if b.Price < 1_000_000 {
			r = 2
		}
		for _, i := range []int{0, r} {
			a.n[i]++
			a.bidders[i][b.Bidder] = true
			a.auctions[i][b.Auction] = true
		}
		a.minute = max(a.minute, minute(b.DateTime))
	}
	for k, a := range groups {
		var vals []any
		if byChannel {
			vals = append(vals, k[0], k[1], a.minute)
		} else {
			vals = append(vals, k[1])
		}
		for i := range 4 {
			vals = append(vals, a.n[i])
		}
		for i := range 4 {
			vals = append(vals, len(a.bidders[i]))
		}
		for i := range 4 {
			vals = append(vals, len(a.auctions[i]))
		}
		out = append(out, row(vals...))
	}
	return out
}

// printLine is a line of the print connector: an optional subtask prefix,
// the row kind and the values.
var printLine = regexp.MustCompile(`^(?:\d+> )?(\+I|-U|\+U|-D)(\[.*\])$`)

// materialize applies a printed changelog to a multiset of rows; a
// retraction of a row that is not there is an error.
func materialize(out string) (map[string]int, error) {
	rows := map[string]int{}
	for line := range strings.Lines(out) {
		m := printLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			return nil, fmt.Errorf("unexpected output line %q", line)
		}
		switch m[1] {
		case "+I", "+U":
			rows[m[2]]++
		default:
			if rows[m[2]] == 0 {
				return nil, fmt.Errorf("%s of a row that is not there: %s", m[1], m[2])
			}
			if rows[m[2]]--; rows[m[2]] == 0 {
				delete(rows, m[2])
			}
		}
	}
	return rows, nil
}

// committedCSV reads the committed csv files under dir as printed rows.
func committedCSV(dir string) (map[string]int, error) {
	rows := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !filesystem.Committed(d.Name()) {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		for _, r := range recs {
			vals := make([]any, len(r))
			for i, v := range r {
				vals[i] = v
			}
			rows[row(vals...)]++
		}
		return nil
	})
	return rows, err
}

func TestQueriesMatchReference(t *testing.T) {
	evs := events(t)
	if n := len(bids(evs)); n < testEvents*9/10 {
		t.Fatalf("only %d bids of %d events", n, testEvents)
	}
	if err := checkNoneLate(evs); err != nil {
		t.Fatal(err)
	}
	qs := slices.Collect(maps.Keys(references))
	qs = slices.Sorted(slices.Values(append(qs, slices.Collect(maps.Keys(structural))...)))
	for _, q := range qs {
		t.Run(q, func(t *testing.T) {
			p := params(t)
			if check := preconditions[q]; check != nil {
				if err := check(evs); err != nil {
					t.Fatal(err)
				}
			}
			if q == "q13" {
				writeSideInput(t, p.SideInput)
			}
			script, err := nexmark.Script(q, p)
			if err != nil {
				t.Fatal(err)
			}
			// Print instead of discarding; q10 writes files.
			script = strings.ReplaceAll(script, "'connector' = 'blackhole'", "'connector' = 'print'")
			script = strings.Replace(script, "'base-time' =", fmt.Sprintf("'out-of-order-group.size' = '%d', 'base-time' =", testOutOfOrder), 1)
			var out bytes.Buffer
			job, err := sql.Prepare(script, sql.Options{
				Stdout: &out, Functions: nexmark.Functions(), Parallelism: 2,
				CheckpointDir: filepath.Join(t.TempDir(), "ckpt"), CheckpointInterval: 50 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			from := time.Now()
			if err := job.Run(ctx); err != nil {
				t.Fatal(err)
			}
			to := time.Now()
			var got map[string]int
			if q == "q10" {
				got, err = committedCSV(p.OutputDir)
			} else {
				got, err = materialize(out.String())
			}
			if err != nil {
				t.Fatal(err)
			}
			if check := structural[q]; check != nil {
				if err := check(evs, got, from, to); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d rows", len(got))
				return
			}
			want := map[string]int{}
			for _, r := range references[q](evs) {
				want[r]++
			}
			if len(want) == 0 {
				t.Fatalf("the reference of %s is empty: the test checks nothing", q)
			}
			t.Logf("%d rows wanted, %d output lines", len(want), strings.Count(out.String(), "\n"))
			compare(t, got, want)
		})
	}
}

// structural check the queries whose result depends on the wall clock:
// got is the printed result of a run between from and to.
var structural = map[string]func(evs []gen.Event, got map[string]int, from, to time.Time) error{"q12": q12Check}

// q12Check checks q12's processing-time windows by their structure, since
// which window a bid falls in depends on when it is processed: every row
// is one bidder's count in one 10 s window aligned to 10 s that overlaps
// the run, no bidder has a window twice, and each bidder's counts add up
// to its bids.
func q12Check(evs []gen.Event, got map[string]int, from, to time.Time) error {
	want := map[int64]int64{}
	for _, b := range bids(evs) {
		want[b.Bidder]++
	}
	counted := map[int64]int64{}
	windows := map[[2]int64]bool{}
	for r, n := range got {
		f := strings.Split(strings.Trim(r, "[]"), ", ")
		if n != 1 || len(f) != 4 {
			return fmt.Errorf("row %s printed %d times, want a row of 4 columns once", r, n)
		}
		bidder, err1 := strconv.ParseInt(f[0], 10, 64)
		count, err2 := strconv.ParseInt(f[1], 10, 64)
		start, err3 := time.Parse("2006-01-02 15:04:05.000", f[2])
		end, err4 := time.Parse("2006-01-02 15:04:05.000", f[3])
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return fmt.Errorf("row %s: %v", r, err)
		}
		switch {
		case count < 1:
			return fmt.Errorf("row %s counts no bid", r)
		case end.Sub(start) != 10*time.Second || start.UnixMilli()%10_000 != 0:
			return fmt.Errorf("row %s: the window is not a 10 s window aligned to 10 s", r)
		case !end.After(from) || start.After(to):
			return fmt.Errorf("row %s: the window is outside the run, %s to %s", r, from.UTC(), to.UTC())
		case windows[[2]int64{bidder, start.UnixMilli()}]:
			return fmt.Errorf("bidder %d has the window from %s twice", bidder, f[2])
		}
		windows[[2]int64{bidder, start.UnixMilli()}] = true
		counted[bidder] += count
	}
	if !maps.Equal(counted, want) {
		return fmt.Errorf("the bids counted per bidder differ from the bids: %d bidders counted, %d have bids", len(counted), len(want))
	}
	return nil
}

// sideValue is the value of key k in the side input of the q13 test.
func sideValue(k int64) string { return fmt.Sprintf("v%d-%d", k, k*37%1000) }

// writeSideInput writes q13's side input: keys 0..9999 with sideValue.
func writeSideInput(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	for k := range int64(10000) {
		fmt.Fprintf(&b, "%d,%s\n", k, sideValue(k))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, got, want map[string]int) {
	t.Helper()
	var missing, extra []string
	for r, n := range want {
		if got[r] < n {
			missing = append(missing, fmt.Sprintf("%dx %s", n-got[r], r))
		}
	}
	for r, n := range got {
		if want[r] < n {
			extra = append(extra, fmt.Sprintf("%dx %s", n-want[r], r))
		}
	}
	if len(missing)+len(extra) == 0 {
		return
	}
	slices.Sort(missing)
	slices.Sort(extra)
	t.Errorf("%d rows missing, %d unexpected (of %d wanted)", len(missing), len(extra), len(want))
	for _, r := range missing[:min(5, len(missing))] {
		t.Errorf("missing %s", r)
	}
	for _, r := range extra[:min(5, len(extra))] {
		t.Errorf("unexpected %s", r)
	}
}

func TestLocate(t *testing.T) {
	script, err := nexmark.Script("q0", params(t))
	if err != nil {
		t.Fatal(err)
	}
	q, _ := nexmark.Query("q0")
	line := slices.IndexFunc(strings.Split(q, "\n"), func(l string) bool { return strings.HasPrefix(l, "SELECT auction, ") }) + 1
	_, err = sql.Prepare(strings.Replace(script, "SELECT auction, ", "SELECT auctionn, ", 1), sql.Options{Stdout: io.Discard})
	want := fmt.Sprintf("column 'auctionn' not found in table 'bid'; did you mean 'auction'? at q0.sql line %d, column 8", line)
	if got := nexmark.Locate("q0", err); line == 0 || err == nil || got.Error() != want {
		t.Errorf("Locate(%v) = %v, want %s", err, got, want)
	}
	ddl := strings.Split(script, "\n")
	line = slices.IndexFunc(ddl, func(l string) bool { return strings.Contains(l, "'events.num'") }) + 1
	_, err = sql.Prepare(strings.Replace(script, "'events.num' = '", "'events.num' = 'x", 1), sql.Options{Stdout: io.Discard})
	want = fmt.Sprintf("at ddl.sql line %d, column 5", line)
	if got := nexmark.Locate("q0", err); err == nil || !strings.HasSuffix(got.Error(), want) {
		t.Errorf("Locate(%v) = %v, want a message ending %q", err, got, want)
	}
}

func TestCountChar(t *testing.T) {
	for _, tc := range []struct {
		s, c string
		want int64
	}{{"abcabc", "c", 2}, {"abc", "", 0}, {"", "c", 0}, {"ccc", "cx", 3}, {"äöä", "ä", 2}} {
		if got := nexmark.CountChar(tc.s, tc.c); got != tc.want {
			t.Errorf("CountChar(%q, %q) = %d, want %d", tc.s, tc.c, got, tc.want)
		}
	}
}

func TestScriptNeedsParams(t *testing.T) {
	if _, err := nexmark.Script("q10", nexmark.Params{}); err == nil || !strings.Contains(err.Error(), "OutputDir") {
		t.Errorf("q10 without an output directory: %v", err)
	}
	if _, err := nexmark.Script("q99", nexmark.Params{}); err == nil || !strings.Contains(err.Error(), "q22") {
		t.Errorf("unknown query: %v", err)
	}
}

// TestWriteSideInput checks the side input the bench writes for q13: one
// row per key 0..9999, so that every bid finds one.
func TestWriteSideInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "side.csv")
	if err := nexmark.WriteSideInput(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10000 {
		t.Fatalf("%d rows, want 10000", len(recs))
	}
	for i, r := range recs {
		if len(r) != 2 || r[0] != strconv.Itoa(i) || r[1] != "side-"+strconv.Itoa(i) {
			t.Fatalf("row %d is %q, want key %d and value side-%d", i, r, i, i)
		}
	}
	if _, err := nexmark.Script("q13", nexmark.Params{}); err == nil || !strings.Contains(err.Error(), "SideInput") {
		t.Errorf("q13 without a side input: %v", err)
	}
}

// TestRestoreExactlyOnce stops q10 (files, committed exactly once) after
// its first committed checkpoint, restores it from the newest checkpoint,
// and checks that the committed rows are exactly the reference's: the
// nexmark source resumes where its checkpoint left it.
func TestRestoreExactlyOnce(t *testing.T) {
	const n = 120_000
	p := params(t)
	p.Events = n
	script, err := nexmark.Script("q10", p)
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	opts := sql.Options{Stdout: io.Discard, Parallelism: 2, CheckpointDir: ckpt, CheckpointInterval: 20 * time.Millisecond}
	job, err := sql.Prepare(script, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- job.Run(ctx) }()
	var first map[string]int
poll:
	for {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the job ended before it was stopped (err %v); give it more events", err)
		case <-time.After(5 * time.Millisecond):
			if rows, err := committedCSV(p.OutputDir); err == nil && len(rows) > 0 {
				break poll
			}
		}
	}
	cancel()
	<-done
	first, err = committedCSV(p.OutputDir)
	if err != nil {
		t.Fatal(err)
	}

	opts.Restore = "latest"
	job, err = sql.Prepare(script, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatalf("restoring: %v", err)
	}
	got, err := committedCSV(p.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gen.ParseOptions(map[string]string{
		"events.num": strconv.Itoa(n), "first-event.rate": strconv.Itoa(testRate), "base-time": strconv.Itoa(testBaseTime),
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gen.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]gen.Event, n)
	for i := range evs {
		g.Fill(int64(i), &evs[i])
	}
	want := map[string]int{}
	for _, r := range references["q10"](evs) {
		want[r]++
	}
	if total := func(m map[string]int) (s int) {
		for _, c := range m {
			s += c
		}
		return s
	}; total(first) >= total(want) {
		t.Fatalf("the first run committed all %d rows before it was stopped; the test restored nothing", total(first))
	} else {
		t.Logf("the first run committed %d of %d rows", total(first), total(want))
	}
	compare(t, got, want)
}
