package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clinkstream/clink/metrics"
)

// syncBuffer is a bytes.Buffer for writers on several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeMetrics is a summarizer whose figures the test sets.
type fakeMetrics struct {
	mu sync.Mutex
	s  metrics.Summary
}

func (f *fakeMetrics) Summary() metrics.Summary {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s
}

func (f *fakeMetrics) set(s metrics.Summary) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s = s
}

// TestStatusLine drives the status line on a fake clock: each refresh
// rewrites the line in place (carriage return and erase-line, no newline)
// with the record rates since the refresh before, the totals, the
// checkpoints completed and the last one's duration; stop erases it.
func TestStatusLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := &fakeMetrics{}
		reg.set(metrics.Summary{RecordsIn: 100, RecordsOut: 50})
		var buf syncBuffer
		st := newStatus(&buf, reg, true, 500*time.Millisecond)

		reg.set(metrics.Summary{RecordsIn: 1100, RecordsOut: 550})
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		first := "\r\033[Krunning: 2000 records/s in, 1000 out (1100, 550 in total); 0 checkpoints"
		if got := buf.String(); got != first {
			t.Fatalf("after one period: %q, want %q", got, first)
		}

		reg.set(metrics.Summary{RecordsIn: 1600, RecordsOut: 1550, CheckpointsCompleted: 3, LastCheckpointDuration: 12300 * time.Microsecond})
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		second := "\r\033[Krunning: 1000 records/s in, 2000 out (1600, 1550 in total); 3 checkpoints, the last in 12ms"
		if got := buf.String(); got != first+second {
			t.Fatalf("after two periods: %q, want %q", got, first+second)
		}

		// Nothing changes: the rates drop to zero.
		time.Sleep(1000 * time.Millisecond)
		synctest.Wait()
		idle := "\r\033[Krunning: 0 records/s in, 0 out (1600, 1550 in total); 3 checkpoints, the last in 12ms"
		if got := buf.String(); got != first+second+idle+idle {
			t.Fatalf("after four periods: %q", got)
		}
		st.stop()
		if got := buf.String(); got != first+second+idle+idle+"\r\033[K" {
			t.Fatalf("stop left %q; want the line erased", got)
		}
		if strings.Contains(buf.String(), "\n") {
			t.Errorf("the status line printed a newline: %q", buf.String())
		}
	})
}

// TestStatusLineHidden: a status that is not shown prints nothing, however
// long the job runs.
func TestStatusLineHidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		st := newStatus(&buf, &fakeMetrics{}, false, 500*time.Millisecond)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		st.stop()
		if buf.String() != "" {
			t.Fatalf("a hidden status printed %q", buf.String())
		}
	})
}

// TestSQLStatusLine runs a short job through clink sql with stderr taken
// for a terminal or not, and with --quiet: the status line appears only on
// a terminal without --quiet, the summary at the end unless --quiet.
func TestSQLStatusLine(t *testing.T) {
	script := filepath.Join(t.TempDir(), "job.sql")
	src := `CREATE TABLE t (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '100', 'number-of-rows' = '40');
CREATE TABLE b (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO b SELECT id FROM t;
`
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		terminal, quiet bool
		status, summary bool
	}{
		{"terminal", true, false, true, true},
		{"terminal quiet", true, true, false, false},
		{"not a terminal", false, false, false, true},
		{"not a terminal quiet", false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := sqlOptions{file: script, checkpointDir: dir, checkpointInterval: 50 * time.Millisecond, parallelism: 1,
				checkpointMode: "aligned", quiet: tc.quiet, statusEvery: 20 * time.Millisecond,
				terminal: func(io.Writer) bool { return tc.terminal }}
			var stdout, stderr syncBuffer
			if err := o.run(context.Background(), &stdout, &stderr); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			errs := stderr.String()
			if !strings.HasPrefix(errs, "checkpoints: "+dir+"\n") {
				t.Errorf("stderr does not start with the checkpoint directory: %q", errs)
			}
			status := strings.Contains(errs, "\r\033[Krunning: ")
			if status != tc.status {
				t.Errorf("status line shown: %v, want %v; stderr %q", status, tc.status, errs)
			}
			if strings.Contains(errs, "\r") != tc.status {
				t.Errorf("carriage returns on stderr: %v, want %v; stderr %q", !tc.status, tc.status, errs)
			}
			const summary = "job finished after "
			if strings.Contains(errs, summary) != tc.summary {
				t.Errorf("summary shown: %v, want %v; stderr %q", !tc.summary, tc.summary, errs)
			}
			if tc.summary {
				// The summary is the last line, after the erased status line,
				// and counts the job's 40 rows through source and sink.
				last := errs[strings.LastIndex(strings.TrimSuffix(errs, "\n"), "\n")+1:]
				if tc.status {
					if i := strings.LastIndex(errs, "\r\033[K"); i < 0 || !strings.HasPrefix(errs[i+4:], summary) {
						t.Errorf("the summary does not follow the erased status line: %q", errs)
					}
					last = errs[strings.LastIndex(errs, "\r\033[K")+4:]
				}
				if !strings.HasPrefix(last, summary) || !strings.Contains(last, "80 records in, 80 out") || !strings.Contains(last, "checkpoints completed, the last in ") {
					t.Errorf("summary %q", last)
				}
			}
			if tc.quiet && errs != "checkpoints: "+dir+"\n" {
				t.Errorf("--quiet printed %q", errs)
			}
		})
	}
}
