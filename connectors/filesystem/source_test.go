package filesystem

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/connector"
)

type kv struct {
	K string
	V int
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeInput writes files files of per records each: "f<i>-<j>,<j>".
func writeInput(t *testing.T, dir string, files, per int) []string {
	t.Helper()
	var all []string
	for i := 0; i < files; i++ {
		var b strings.Builder
		for j := 0; j < per; j++ {
			fmt.Fprintf(&b, "f%d-%d,%d\n", i, j, j)
			all = append(all, fmt.Sprintf("f%d-%d", i, j))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("in-%d.csv", i)), b.String())
	}
	return all
}

func ctxOf(sub, par int) connector.SourceContext {
	return connector.SourceContext{UID: "src", Subtask: sub, Parallelism: par, MaxParallelism: 128}
}

// readN reads up to n records (n < 0: all) and returns them with the
// reader's offset after them.
func readN(t *testing.T, r connector.SourceReader[kv], n int) ([]string, []byte) {
	t.Helper()
	var out []string
	for n != 0 {
		m := 7
		if n > 0 {
			m = min(m, n)
		}
		st, err := r.Read(m, func(v kv, ts int64) error {
			if ts != connector.NoTimestamp {
				t.Errorf("record %v has timestamp %d", v, ts)
			}
			out = append(out, v.K)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			n -= m
		}
		if st == connector.Done {
			break
		}
	}
	off, _ := r.Offset()
	return out, off
}

func TestSourceSplitsFilesAndResumes(t *testing.T) {
	dir := t.TempDir()
	all := writeInput(t, dir, 5, 40)
	writeFile(t, filepath.Join(dir, ".hidden.csv"), "not,csv,at all\n")
	writeFile(t, filepath.Join(dir, "_SUCCESS"), "")
	src, err := NewSource[kv](dir, CSV)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for sub := 0; sub < 2; sub++ {
		r, err := src.Open(ctxOf(sub, 2), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Read a little, checkpoint, and continue in a new reader from
		// the offset, several times.
		for _, n := range []int{13, 1, 40, 0, 55} {
			recs, off := readN(t, r, n)
			got = append(got, recs...)
			r.Close()
			if r, err = src.Open(ctxOf(sub, 2), off, nil); err != nil {
				t.Fatal(err)
			}
		}
		recs, _ := readN(t, r, -1)
		got = append(got, recs...)
		r.Close()
	}
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Fatalf("read %d records, want %d exactly once", len(got), len(all))
	}
}

func TestSourceRescale(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{3, 2}, {2, 3}, {3, 1}, {1, 4}} {
		t.Run(fmt.Sprintf("%dto%d", tc.from, tc.to), func(t *testing.T) {
			dir := t.TempDir()
			all := writeInput(t, dir, 5, 30)
			src, err := NewSource[kv](filepath.Join(dir, "*.csv"), CSV)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var offs [][]byte
			for sub := 0; sub < tc.from; sub++ {
				r, err := src.Open(ctxOf(sub, tc.from), nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				recs, off := readN(t, r, 17*(sub+1))
				got = append(got, recs...)
				offs = append(offs, off)
				r.Close()
			}
			for sub := 0; sub < tc.to; sub++ {
				r, err := src.Open(ctxOf(sub, tc.to), nil, offs)
				if err != nil {
					t.Fatal(err)
				}
				recs, _ := readN(t, r, -1)
				got = append(got, recs...)
				r.Close()
			}
			slices.Sort(got)
			slices.Sort(all)
			if !slices.Equal(got, all) {
				t.Fatalf("read %d records, want %d exactly once", len(got), len(all))
			}
		})
	}
}

func TestSourceLineNumbersInErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	writeFile(t, path, "a,1\r\n\"two\nlines\",2\n\nb,x\n")
	src, _ := NewSource[kv](path, CSV)
	r, err := src.Open(ctxOf(0, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, off := readN(t, r, 2)
	if !slices.Equal(recs, []string{"a", "two\nlines"}) {
		t.Fatalf("read %q", recs)
	}
	// The blank line 4 is skipped; line 5 is bad. A reader restored
	// after the multi-line record still counts lines right.
	r2, err := src.Open(ctxOf(0, 1), off, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range []connector.SourceReader[kv]{r, r2} {
		_, err = rd.Read(10, func(kv, int64) error { return nil })
		want := path + ":5: field 2 (V)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
		rd.Close()
	}
	_, text := r2.Offset()
	if !strings.Contains(text, "line 5") {
		t.Errorf("offset text %q does not name line 5", text)
	}
}

func TestSourceJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	writeFile(t, path, "{\"K\":\"a\",\"V\":1}\n\n  \n{\"K\":\"b\",\"V\":2}\n{\"K\":\"c\",\"V\":\"x\"}")
	src, err := NewSource[kv](path, JSON)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := src.Open(ctxOf(0, 1), nil, nil)
	var got []string
	_, err = r.Read(10, func(v kv, _ int64) error { got = append(got, v.K); return nil })
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("read %q, want a and b", got)
	}
	if want := path + ":5: decoding json"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}

func TestSourceOpenErrors(t *testing.T) {
	dir := t.TempDir()
	writeInput(t, dir, 2, 10)
	src, _ := NewSource[kv](dir, CSV)
	r, _ := src.Open(ctxOf(0, 1), nil, nil)
	_, off := readN(t, r, 15) // into the second file
	r.Close()
	_, rescaleOff := readN(t, mustOpen(t, src, ctxOf(0, 1)), 3)

	if _, err := NewSource[kv]("", CSV); err == nil || !strings.Contains(err.Error(), "path is empty") {
		t.Errorf("empty path: %v", err)
	}
	if _, err := NewSource[kv](filepath.Join(dir, "[x"), CSV); err == nil || !strings.Contains(err.Error(), "bad pattern") {
		t.Errorf("bad pattern: %v", err)
	}
	if _, err := NewSource[int](dir, CSV); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("csv of int: %v", err)
	}
	none, _ := NewSource[kv](filepath.Join(dir, "*.nothing"), CSV)
	if _, err := none.Open(ctxOf(0, 1), nil, nil); err == nil || !strings.Contains(err.Error(), "no files to read") {
		t.Errorf("no match: %v", err)
	}
	if _, err := src.Open(ctxOf(0, 1), []byte{9}, nil); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("bad offset: %v", err)
	}
	if _, err := src.Open(ctxOf(0, 1), off[:len(off)-1], nil); err == nil || !strings.Contains(err.Error(), "decoding a file source offset") {
		t.Errorf("truncated offset: %v", err)
	}
	if _, err := src.Open(ctxOf(0, 2), nil, [][]byte{rescaleOff, rescaleOff}); err == nil || !strings.Contains(err.Error(), "both hold") {
		t.Errorf("a file in two old subtasks: %v", err)
	}
	if _, err := src.Open(ctxOf(0, 2), nil, [][]byte{{1, 200}}); err == nil || !strings.Contains(err.Error(), "restoring old subtask 0") {
		t.Errorf("bad rescaled offset: %v", err)
	}
	second := filepath.Join(dir, "in-1.csv")
	if err := os.Truncate(second, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Open(ctxOf(0, 1), off, nil); err == nil || !strings.Contains(err.Error(), second+" at byte") || !strings.Contains(err.Error(), "has only 3 bytes") {
		t.Errorf("shrunk file: %v", err)
	}
	if err := os.Remove(second); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Open(ctxOf(0, 1), off, nil); err == nil || !strings.Contains(err.Error(), second) {
		t.Errorf("missing file: %v", err)
	}
	// A file that vanishes after the listing fails the read, naming it.
	r, err := src.Open(ctxOf(0, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "in-0.csv")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(1, func(kv, int64) error { return nil }); err == nil || !strings.Contains(err.Error(), "in-0.csv") {
		t.Errorf("vanished file: %v", err)
	}
}

func mustOpen(t *testing.T, src connector.Source[kv], ctx connector.SourceContext) connector.SourceReader[kv] {
	t.Helper()
	r, err := src.Open(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestSourceEmitErrorStops(t *testing.T) {
	dir := t.TempDir()
	writeInput(t, dir, 1, 5)
	src, _ := NewSource[kv](dir, CSV)
	r := mustOpen(t, src, ctxOf(0, 1))
	boom := fmt.Errorf("downstream failed")
	if _, err := r.Read(5, func(kv, int64) error { return boom }); err != boom {
		t.Fatalf("got %v, want the emit error", err)
	}
}

func FuzzSourceOffset(f *testing.F) {
	f.Add(encodeOffset([]filePos{{Path: "/a.csv", Offset: 10, Line: 2}, {Path: "/b.csv", Line: 1}}))
	f.Add([]byte{})
	f.Add([]byte{1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := decodeOffset(b)
		if err != nil {
			return
		}
		again, err := decodeOffset(encodeOffset(files))
		if err != nil || !slices.Equal(files, again) {
			t.Fatalf("offset does not round-trip: %v vs %v (%v)", files, again, err)
		}
	})
}

// TestSourceListsOnceForAllSubtasks: the subtasks of one job open at
// different moments; a file added or removed in between must not make
// them deal from different listings (a file read twice or never). The
// listing of the first open is every subtask's; a file added after it is
// not read.
func TestSourceListsOnceForAllSubtasks(t *testing.T) {
	dir := t.TempDir()
	all := writeInput(t, dir, 4, 5)
	src, err := NewSource[kv](dir, CSV)
	if err != nil {
		t.Fatal(err)
	}
	const par = 3
	var got []string
	for sub := 0; sub < par; sub++ {
		r, err := src.Open(ctxOf(sub, par), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := readN(t, r, -1)
		got = append(got, recs...)
		r.Close()
		if sub == 0 {
			// Sorts between in-0.csv and in-1.csv: a second listing
			// would shift every later file to another subtask.
			writeFile(t, filepath.Join(dir, "in-0a.csv"), "late,1\n")
		}
	}
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Fatalf("read %q, want every record of the first listing exactly once (%d)", got, len(all))
	}
}
