package crashtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clinkstream/clink"
	"github.com/clinkstream/clink/connector"
	"github.com/clinkstream/clink/connectors/filesystem"
)

// CountInput is the input of the file-based crash campaigns: Records csv
// lines "id,key" spread over Files files (record i in file i mod Files),
// with Keys distinct keys.
type CountInput struct {
	Files   int
	Records int64
	Keys    int64
}

// InRec is one line of the input.
type InRec struct {
	ID  int64
	Key string
}

// Count is what the count job emits: the N-th record of Key was ID.
type Count struct {
	Key string
	N   int64
	ID  int64
}

// Key returns the key of record id.
func (in CountInput) Key(id int64) string {
	return "k" + strconv.FormatInt(id*7919%in.Keys, 10)
}

// Write writes the input files into dir.
func (in CountInput) Write(t testing.TB, dir string) {
	t.Helper()
	for i := 0; i < in.Files; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("in-%02d.csv", i)))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for id := int64(i); id < in.Records; id += int64(in.Files) {
			fmt.Fprintf(w, "%d,%s\n", id, in.Key(id))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// pacer holds the process to rate records per second.
type pacer struct {
	rate  float64
	start time.Time
	n     atomic.Int64
}

func (p *pacer) wait() {
	if p == nil {
		return
	}
	n := p.n.Add(1)
	if n%64 != 0 {
		return
	}
	due := p.start.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}

// CountJob builds the job the file-based campaigns kill: the csv files
// under in read at parallelism 2, paced to rate records per second (0: as
// fast as possible) so that the killed runs do not reach the end, keyed by
// the record's key, counted per key, turned into R by row, and committed
// by sink.
func CountJob[R, C any](opts clink.Options, in string, rate float64, row func(Count) R, sink func() connector.CommittingSink[R, C]) (*clink.Environment, error) {
	env, err := clink.NewEnvironment(opts)
	if err != nil {
		return nil, err
	}
	src, err := filesystem.NewSource[InRec](in, filesystem.CSV)
	if err != nil {
		return nil, err
	}
	var p *pacer
	if rate > 0 {
		p = &pacer{rate: rate, start: time.Now()}
	}
	recs := clink.FromSource(env, "files", 2, src)
	recs = clink.Map(recs, "pace", func(r InRec) InRec { p.wait(); return r })
	keyed := clink.KeyBy(recs, func(r InRec) string { return r.Key })
	counts := clink.Process(keyed, "count", func(ctx *clink.KeyedContext[string, int64], r InRec, out *clink.Collector[R]) error {
		n, _ := ctx.Value()
		n++
		ctx.SetValue(n)
		out.Collect(row(Count{Key: r.Key, N: n, ID: r.ID}))
		return nil
	})
	clink.CommitTo(counts, "out", sink)
	return env, nil
}

// Check checks the committed output of the count job: every input id
// exactly once, under its key, and every key's counts exactly 1..n.
func (in CountInput) Check(t testing.TB, got []Count) {
	t.Helper()
	seen := make([]int, in.Records)
	counts := map[string][]int{}
	bad := 0
	for _, r := range got {
		if r.ID < 0 || r.ID >= in.Records || r.Key != in.Key(r.ID) {
			if bad++; bad <= 10 {
				t.Errorf("committed record %+v is not one of the input's", r)
			}
			continue
		}
		seen[r.ID]++
		counts[r.Key] = append(counts[r.Key], int(r.N))
	}
	lost, dup := 0, 0
	for id, n := range seen {
		switch {
		case n == 0:
			if lost++; lost <= 5 {
				t.Errorf("record %d is missing", id)
			}
		case n > 1:
			if dup++; dup <= 5 {
				t.Errorf("record %d is committed %d times", id, n)
			}
		}
	}
	if lost+dup > 0 {
		t.Errorf("%d committed records for %d inputs: %d lost, %d duplicated", len(got), in.Records, lost, dup)
	}
	want := map[string]int{}
	for id := int64(0); id < in.Records; id++ {
		want[in.Key(id)]++
	}
	for k, n := range want {
		ns := counts[k]
		has := make([]bool, n+1)
		ok := len(ns) == n
		for _, x := range ns {
			if x < 1 || x > n || has[x] {
				ok = false
				break
			}
			has[x] = true
		}
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("key %s: counts %d values, want exactly 1..%d", k, len(ns), n)
			}
		}
	}
}
