package sql_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql"
)

// lookupSide is the side file of the lookup join tests: keys 0..9 but 3
// and 7, key 5 twice, and a row with no key, which nothing finds.
const lookupSide = "0,zero,0\n1,one,10\n2,two,20\n4,four,40\n5,five,50\n5,fünf,55\n6,six,60\n8,eight,80\n9,nine,90\n,nokey,0\n"

// lookupRows are the side file's rows by key: value and weight.
func lookupRows() map[int64][][2]string {
	m := map[int64][][2]string{}
	for _, l := range strings.Split(strings.TrimSpace(lookupSide), "\n") {
		f := strings.Split(l, ",")
		k, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		m[k] = append(m[k], [2]string{f[1], f[2]})
	}
	return m
}

func lookupScript(dir, query string) string {
	return fmt.Sprintf(`
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '40',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '39');
CREATE TABLE side (k INT, v STRING, w BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
CREATE TABLE p (id BIGINT, k INT, v STRING) WITH ('connector' = 'print');
CREATE VIEW s AS SELECT id, PROCTIME() AS pt FROM src;
INSERT INTO p %s;`, filepath.Join(dir, "side.csv"), query)
}

// TestLookupJoin joins a sequence with a side file by an expression of
// the probe row: inner, LEFT, with more of the condition, against keys
// that are missing, repeated or NULL.
func TestLookupJoin(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"side.csv": lookupSide})
	side := lookupRows()
	for _, tc := range []struct {
		name, query string
		left        bool
		keep        func(id int64, w string) bool
	}{
		{name: "inner", query: "SELECT s.id, S.k, S.v FROM s JOIN side FOR SYSTEM_TIME AS OF s.pt AS S ON S.k = s.id % 10"},
		{name: "left", left: true, query: "SELECT s.id, S.k, S.v FROM s LEFT JOIN side FOR SYSTEM_TIME AS OF s.pt AS S ON s.id % 10 = S.k"},
		{name: "condition", left: true,
			query: "SELECT s.id, S.k, S.v FROM s LEFT JOIN side FOR SYSTEM_TIME AS OF s.pt AS S ON S.k = s.id % 10 AND S.w > s.id",
			keep:  func(id int64, w string) bool { n, _ := strconv.ParseInt(w, 10, 64); return n > id }},
		{name: "where", query: "SELECT s.id, side.k, side.v FROM s, side FOR SYSTEM_TIME AS OF s.pt WHERE side.k = s.id % 10 AND s.id < 20",
			keep: func(id int64, _ string) bool { return id < 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for id := int64(0); id < 40; id++ {
				found := false
				for _, r := range side[id%10] {
					if tc.keep == nil || tc.keep(id, r[1]) {
						found = true
						want = append(want, fmt.Sprintf("+I[%d, %d, %s]", id, id%10, r[0]))
					}
				}
				if !found && tc.left {
					want = append(want, fmt.Sprintf("+I[%d, NULL, NULL]", id))
				}
			}
			slices.Sort(want)
			got := lines(t, run(t, lookupScript(dir, tc.query), 2))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d rows, want %d\ngot:  %v\nwant: %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestLookupJoinMissingFile fails the job with the table's name when the
// side file is not there.
func TestLookupJoinMissingFile(t *testing.T) {
	err := runErr(t, lookupScript(t.TempDir(), "SELECT s.id, S.k, S.v FROM s JOIN side FOR SYSTEM_TIME AS OF s.pt AS S ON S.k = s.id"))
	if err == nil || !strings.Contains(err.Error(), "reading lookup table 'side'") {
		t.Fatalf("err = %v, want one about reading lookup table 'side'", err)
	}
}

// TestLookupJoinRestore stops a lookup join job after checkpoints and
// restores it: the side table is read again, and the exactly-once file
// sink holds every joined row once.
func TestLookupJoinRestore(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"side.csv": lookupSide})
	script := fmt.Sprintf(`
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '300',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '399');
CREATE TABLE side (k INT, v STRING, w BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
CREATE TABLE f (id BIGINT, v STRING) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f SELECT s.id, S.v FROM (SELECT id, PROCTIME() AS pt FROM src) s
LEFT JOIN side FOR SYSTEM_TIME AS OF s.pt AS S ON S.k = s.id %% 10;`, filepath.Join(dir, "side.csv"), out)
	side := lookupRows()
	var want []string
	for id := int64(0); id < 400; id++ {
		rs := side[id%10]
		if len(rs) == 0 {
			want = append(want, fmt.Sprintf("%d,", id))
		}
		for _, r := range rs {
			want = append(want, fmt.Sprintf("%d,%s", id, r[0]))
		}
	}
	slices.Sort(want)
	checkRestoreMidway(t, script, out, want, 700*time.Millisecond)
}

// timedWriter records when each line is written.
type timedWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []timedLine
}

type timedLine struct {
	at   time.Time
	line string
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		l, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(l)
			break
		}
		w.lines = append(w.lines, timedLine{time.Now(), strings.TrimSuffix(l, "\n")})
	}
	return len(p), nil
}

// TestProcTimeTumble counts rows that arrive over about 2.5 s in 1 s
// windows of processing time: each window is printed once the wall clock
// passes its end (not before, and the closed ones before the input ends),
// is aligned to the second, and the windows count every row once.
func TestProcTimeTumble(t *testing.T) {
	script := `
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '40',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '99');
CREATE TABLE p (k BIGINT, n BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3)) WITH ('connector' = 'print');
CREATE VIEW v AS SELECT id, PROCTIME() AS pt FROM src;
INSERT INTO p SELECT id % 2, COUNT(*), window_start, window_end FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(pt), INTERVAL '1' SECOND))
GROUP BY id % 2, window_start, window_end;`
	var w timedWriter
	start := time.Now()
	if err := sql.Run(context.Background(), script, sql.Options{Parallelism: 2, CheckpointDir: t.TempDir(), Stdout: &w, Stderr: &w}); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	counts := map[int64]int64{}
	seen := map[string]bool{}
	byTimer := 0
	for _, l := range w.lines {
		var k, n int64
		var ws, we string
		line := l.line
		if _, after, ok := strings.Cut(line, "> "); ok {
			line = after // the subtask's prefix
		}
		f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "+I["), "]"), ", ")
		if len(f) != 4 {
			t.Fatalf("unexpected line %q", l.line)
		}
		k, _ = strconv.ParseInt(f[0], 10, 64)
		n, _ = strconv.ParseInt(f[1], 10, 64)
		ws, we = f[2], f[3]
		s, err1 := time.Parse("2006-01-02 15:04:05.000", ws)
		e, err2 := time.Parse("2006-01-02 15:04:05.000", we)
		if err1 != nil || err2 != nil || e.Sub(s) != time.Second || s.UnixMilli()%1000 != 0 {
			t.Fatalf("line %q: not a 1 s window aligned to the second", l.line)
		}
		if seen[f[0]+ws] {
			t.Fatalf("key %d has the window from %s twice", k, ws)
		}
		seen[f[0]+ws] = true
		if e.Before(start.Add(-time.Second)) || s.After(end) {
			t.Fatalf("line %q: the window is outside the run (%s to %s)", l.line, start.UTC(), end.UTC())
		}
		// A window that ended well before the job did fired by its timer,
		// not at the end of the input.
		if l.at.Before(e) && e.Add(time.Second).Before(end) {
			t.Fatalf("line %q printed at %s, before its window ended", l.line, l.at.UTC())
		}
		if l.at.Add(time.Second).Before(end) {
			byTimer++
		}
		counts[k] += n
	}
	if counts[0] != 50 || counts[1] != 50 {
		t.Fatalf("counted %v, want 50 rows of each key", counts)
	}
	if byTimer == 0 {
		t.Fatalf("no window fired before the input ended: %v", w.lines)
	}
}

// TestProcTimeTumbleRestore stops a processing-time window job midway and
// restores it: the windows' state and timers come back, and the committed
// counts add up to every row once.
func TestProcTimeTumbleRestore(t *testing.T) {
	out := t.TempDir()
	script := fmt.Sprintf(`
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '200',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '599');
CREATE TABLE f (k BIGINT, n BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '%s', 'format' = 'csv');
CREATE VIEW v AS SELECT id, PROCTIME() AS pt FROM src;
SET 'execution.checkpointing.interval' = '50ms';
INSERT INTO f SELECT id %% 2, COUNT(*), window_start, window_end
FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(pt), INTERVAL '1' SECOND))
GROUP BY id %% 2, window_start, window_end;`, out)
	ckpt := t.TempDir()
	var first bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1800*time.Millisecond)
	defer cancel()
	if err := sql.Run(ctx, script, sql.Options{Parallelism: 2, CheckpointDir: ckpt, Stdout: &first, Stderr: &first}); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	sum := func() (map[string]int64, int) {
		rows := committedRows(t, out)
		counts := map[string]int64{}
		seen := map[string]bool{}
		for _, r := range rows {
			f := strings.Split(r, ",")
			if len(f) != 4 || seen[f[0]+f[2]] {
				t.Fatalf("row %q: not a row of 4 columns, or a key's window twice in %v", r, rows)
			}
			seen[f[0]+f[2]] = true
			n, _ := strconv.ParseInt(f[1], 10, 64)
			counts[f[0]] += n
		}
		return counts, len(rows)
	}
	before, nb := sum()
	if nb == 0 || before["0"]+before["1"] == 600 {
		t.Fatalf("the first run committed %v; the test needs a job stopped midway", before)
	}
	run2(t, script, ckpt)
	t.Logf("the first run committed %d windows: %v", nb, before)
	if after, _ := sum(); after["0"] != 300 || after["1"] != 300 {
		t.Fatalf("after the restore the windows count %v, want 300 rows of each key (first run: %v)", after, before)
	}
}
