package filesystem

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/connector"
)

func openSink[T any](t *testing.T, dir string, format Format, opts SinkOptions) connector.CommittingSink[T, Committable] {
	t.Helper()
	newSink, err := NewSink[T](dir, format, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := newSink()
	if err := s.Open(connector.InitContext[Committable]{UID: "out", Subtask: 3, Parallelism: 4, RunToken: "run1", PreviousGeneration: -1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestSinkNamesAndVisibility(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b") // created at open
	s := openSink[kv](t, dir, CSV, SinkOptions{})
	if _, ok, err := s.PrepareCommit(1); ok || err != nil {
		t.Fatalf("an empty interval prepared a handle (%v, %v)", ok, err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Fatalf("an empty interval left files %q", got)
	}
	for i := 0; i < 3; i++ {
		if err := s.Write(kv{K: "k", V: i}); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, dir); !slices.Equal(got, []string{".part-sub3-run1-1.csv.inprogress"}) {
		t.Fatalf("while writing: %q", got)
	}
	c, ok, err := s.PrepareCommit(7)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := PartFile{Staged: ".part-sub3-run1-7.csv.staged", Final: "part-sub3-run1-7.csv"}
	if len(c.Files) != 1 || c.Files[0] != want || c.Dir != dir {
		t.Fatalf("handle %+v, want %s with %+v", c, dir, want)
	}
	if got := names(t, dir); !slices.Equal(got, []string{want.Staged}) {
		t.Fatalf("after prepare: %q", got)
	}
	if err := s.Commit(c); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{want.Final}) {
		t.Fatalf("after commit: %q", got)
	}
	data, _ := os.ReadFile(filepath.Join(dir, want.Final))
	if string(data) != "k,0\nk,1\nk,2\n" {
		t.Fatalf("committed %q", data)
	}
}

func TestSinkRolls(t *testing.T) {
	dir := t.TempDir()
	s := openSink[kv](t, dir, JSON, SinkOptions{RollSize: 30, Prefix: "events"})
	for i := 0; i < 5; i++ { // 16 bytes each: a new file every second record
		if err := s.Write(kv{K: "k", V: i}); err != nil {
			t.Fatal(err)
		}
	}
	c, _, err := s.PrepareCommit(2)
	if err != nil {
		t.Fatal(err)
	}
	var finals []string
	for _, f := range c.Files {
		finals = append(finals, f.Final)
	}
	if want := []string{"events-sub3-run1-2-0.json", "events-sub3-run1-2-1.json", "events-sub3-run1-2-2.json"}; !slices.Equal(finals, want) {
		t.Fatalf("rolled files %q, want %q", finals, want)
	}
	if err := s.Commit(c); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, finals) {
		t.Fatalf("directory holds %q", got)
	}
}

func TestSinkCloseDiscardsUnstaged(t *testing.T) {
	dir := t.TempDir()
	s := openSink[kv](t, dir, CSV, SinkOptions{RollSize: 10})
	for i := 0; i < 4; i++ {
		if err := s.Write(kv{K: "k", V: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 0 {
		t.Fatalf("close left %q", got)
	}
}

func TestNewSinkErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		format Format
		opts   SinkOptions
		path   string
		want   string
	}{
		{"hidden prefix", CSV, SinkOptions{Prefix: ".x"}, dir, `file prefix ".x" must be`},
		{"underscore prefix", CSV, SinkOptions{Prefix: "_x"}, dir, `file prefix "_x" must be`},
		{"prefix with a slash", CSV, SinkOptions{Prefix: "a/b"}, dir, `file prefix "a/b" must be`},
		{"negative roll", CSV, SinkOptions{RollSize: -1}, dir, "negative roll size -1"},
		{"negative buffer", CSV, SinkOptions{BufferSize: -1}, dir, "negative buffer size -1"},
		{"bad format", "xml", SinkOptions{}, dir, `unknown format "xml"`},
		{"empty path", CSV, SinkOptions{}, "", "the sink path is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSink[kv](tc.path, tc.format, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if tc.path != "" && !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %q does not name the path", err)
			}
		})
	}
	if _, err := NewSink[int](dir, CSV, SinkOptions{}); err == nil || !strings.Contains(err.Error(), "csv needs a struct") {
		t.Fatalf("csv of int: %v", err)
	}
}

func TestSinkIOErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "")
	newSink, _ := NewSink[kv](file, CSV, SinkOptions{})
	err := newSink().Open(connector.InitContext[Committable]{RunToken: "r"})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("a sink path that is a file: %v", err)
	}

	// The directory disappears under an open sink.
	gone := filepath.Join(dir, "gone")
	s := openSink[kv](t, gone, CSV, SinkOptions{})
	os.RemoveAll(gone)
	if err := s.Write(kv{}); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("writing into a removed directory: %v", err)
	}

	// A record the format cannot encode names the file and record.
	type ch struct{ C chan int }
	j := openSink[ch](t, filepath.Join(dir, "j"), JSON, SinkOptions{})
	if err := j.Write(ch{}); err == nil || !strings.Contains(err.Error(), "record 1 of "+filepath.Join(dir, "j", ".part-sub3-run1-1.json.inprogress")) {
		t.Errorf("an unencodable record: %v", err)
	}
}

func TestCommitAndAbortEdgeCases(t *testing.T) {
	dir := t.TempDir()
	s := openSink[kv](t, dir, CSV, SinkOptions{})
	write := func(ckpt checkpoint.ID) Committable {
		t.Helper()
		if err := s.Write(kv{K: "x"}); err != nil {
			t.Fatal(err)
		}
		c, _, err := s.PrepareCommit(ckpt)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var p Publisher

	// Both names gone: the records are lost, which Commit must say.
	c := write(1)
	if err := p.Abort(c); err != nil {
		t.Fatal(err)
	}
	err := p.Commit(c)
	if err == nil || !strings.Contains(err.Error(), "neither the staged file nor the committed file") || !strings.Contains(err.Error(), c.Files[0].Final) {
		t.Errorf("committing an aborted handle: %v", err)
	}

	// The final name is taken by a directory: the rename fails, naming
	// both.
	c = write(2)
	if err := os.MkdirAll(filepath.Join(dir, c.Files[0].Final, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(c); err == nil || !strings.Contains(err.Error(), c.Files[0].Staged) || !strings.Contains(err.Error(), c.Files[0].Final) {
		t.Errorf("committing onto a directory: %v", err)
	}

	// The staged name is a non-empty directory: Abort cannot remove it.
	bogus := Committable{Dir: dir, Files: []PartFile{{Staged: "blocked", Final: "f"}}}
	if err := os.MkdirAll(filepath.Join(dir, "blocked", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Abort(bogus); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "blocked")) {
		t.Errorf("aborting a blocked name: %v", err)
	}

	if err := syncDir(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("syncing a missing directory: %v", err)
	}
}

func TestUnmarshalCommittableErrors(t *testing.T) {
	var p Publisher
	enc := func(c Committable) []byte { b, _ := p.MarshalCommittable(c); return b }
	good := enc(Committable{Dir: "/out", Files: []PartFile{{Staged: ".a.staged", Final: "a"}}})
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "unexpected end"},
		{"version", append([]byte{2}, good[1:]...), "version 2"},
		{"trailing", append(slices.Clone(good), 0), "1 bytes left"},
		{"truncated", good[:len(good)-1], "string of"},
		{"relative dir", enc(Committable{Dir: "out"}), `directory "out" is not an absolute path`},
		{"path in a name", enc(Committable{Dir: "/out", Files: []PartFile{{Staged: "../x", Final: "a"}}}), `"../x" is not a file name`},
		{"empty name", enc(Committable{Dir: "/out", Files: []PartFile{{Staged: "s", Final: ""}}}), `"" is not a file name`},
		{"huge count", []byte{1, 1, '/', 0xff, 0x7f}, "files but only"},
	} {
		if _, err := p.UnmarshalCommittable(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	c, err := p.UnmarshalCommittable(good)
	if err != nil || c.Dir != "/out" || len(c.Files) != 1 {
		t.Errorf("decoding a good handle: %+v %v", c, err)
	}
}

func TestPartFilesMisuse(t *testing.T) {
	p, err := NewPartFiles(t.TempDir(), "p", ".x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("create before open: %v", err)
	}
	if err := p.Open(connector.InitContext[Committable]{RunToken: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(); err == nil || !strings.Contains(err.Error(), "is still open") {
		t.Errorf("create twice: %v", err)
	}
	if err := p.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPartFiles("d", "p", "/x"); err == nil || !strings.Contains(err.Error(), "path separator") {
		t.Errorf("extension with a separator: %v", err)
	}
}

// recordSyncs makes the package's directory fsyncs record their paths.
func recordSyncs(t *testing.T) *[]string {
	t.Helper()
	var synced []string
	old := syncDir
	syncDir = func(dir string) error {
		synced = append(synced, dir)
		return old(dir)
	}
	t.Cleanup(func() { syncDir = old })
	return &synced
}

// TestSinkSyncsParentsOfCreatedDirectories: a directory the sink creates
// is an entry in its parent, which must be fsynced too, or a power loss
// after a commit can drop the directory with every committed file.
func TestSinkSyncsParentsOfCreatedDirectories(t *testing.T) {
	base := t.TempDir()
	synced := recordSyncs(t)
	openSink[kv](t, filepath.Join(base, "a", "b"), CSV, SinkOptions{})
	for _, want := range []string{base, filepath.Join(base, "a")} {
		if !slices.Contains(*synced, want) {
			t.Errorf("creating %s/a/b synced %q, not %s", base, *synced, want)
		}
	}

	// An existing directory needs nothing; with fsyncs off, nothing is
	// synced.
	*synced = nil
	openSink[kv](t, filepath.Join(base, "a", "b"), CSV, SinkOptions{})
	if len(*synced) != 0 {
		t.Errorf("opening an existing directory synced %q", *synced)
	}
	t.Setenv("CLINK_STATE_FSYNC", "0")
	openSink[kv](t, filepath.Join(base, "c", "d"), CSV, SinkOptions{})
	if len(*synced) != 0 {
		t.Errorf("with CLINK_STATE_FSYNC=0, creating a directory synced %q", *synced)
	}
}

// TestCommitNeverReplacesAnotherFile: a final name that exists and is not
// the handle's own file is never overwritten; the commit fails and keeps
// the staged file. A commit killed between publishing the file and
// removing its staged name finishes when it runs again.
func TestCommitNeverReplacesAnotherFile(t *testing.T) {
	dir := t.TempDir()
	s := openSink[kv](t, dir, CSV, SinkOptions{})
	if err := s.Write(kv{K: "mine"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := s.PrepareCommit(1)
	if err != nil {
		t.Fatal(err)
	}
	staged, final := filepath.Join(dir, c.Files[0].Staged), filepath.Join(dir, c.Files[0].Final)
	writeFile(t, final, "theirs\n")
	err = s.Commit(c)
	if err == nil || !strings.Contains(err.Error(), c.Files[0].Final) || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("committing onto another file: %v", err)
	}
	if data, _ := os.ReadFile(final); string(data) != "theirs\n" {
		t.Fatalf("the other file now holds %q", data)
	}
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("the failed commit lost the staged file: %v", err)
	}

	// Killed after the link, before the staged name was removed: both
	// names are the one file, and the commit again completes.
	if err := os.Remove(final); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(staged, final); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(c); err != nil {
		t.Fatalf("finishing a commit killed between link and remove: %v", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{c.Files[0].Final}) {
		t.Fatalf("after the commit: %q", got)
	}
	if data, _ := os.ReadFile(final); string(data) != "mine,0\n" {
		t.Fatalf("committed %q", data)
	}
	// And once more: staged gone, final present.
	if err := s.Commit(c); err != nil {
		t.Fatalf("committing a committed handle: %v", err)
	}
}

// TestOpenRemovesOrphans: at open a subtask removes the hidden files of
// this sink that crashed runs of the subtasks it succeeds left behind, and
// nothing else: not what a pending handle names, not another sink's, not
// another live subtask's, not this run's.
func TestOpenRemovesOrphans(t *testing.T) {
	type tc struct {
		name   string
		ctx    connector.InitContext[Committable]
		remove []string // files that must go; every other stays
	}
	pending := Committable{Files: []PartFile{{Staged: ".part-sub1-old2-7.csv.staged", Final: "part-sub1-old2-7.csv"}}}
	files := []string{
		".part-sub1-old1-3.csv.inprogress",
		".part-sub1-old1-5.csv.staged",
		".part-sub1-old1-5-1.csv.staged",
		".part-sub1-old2-7.csv.staged",    // named by the pending handle
		".part-sub1-now-1.csv.inprogress", // this run's
		".part-sub0-old1-2.csv.inprogress",
		".part-sub0-old1-2.csv.staged",
		".part-sub5-old1-2.csv.inprogress",
		".part-sub5-old1-4.csv.staged",
		".part-sub1-old1-3.json.inprogress",       // another format
		".other-sub1-old1-3.csv.inprogress",       // another prefix
		".part-sub1-x-sub1-old1-3.csv.inprogress", // prefix part-sub1-x
		"part-sub1-old1-1.csv",                    // committed
		".part-sub1-old1-9.csv.staged.tmp",
	}
	base := func() connector.InitContext[Committable] {
		return connector.InitContext[Committable]{UID: "out", Subtask: 1, Parallelism: 2, RunToken: "now", Logger: slog.New(slog.DiscardHandler)}
	}
	fresh := base()
	fresh.PreviousGeneration = -1
	restored := base()
	restored.Succeeds, restored.Pending = []int{1}, []Committable{pending}
	// Scaled down from 6: subtask 1 succeeds old 1 and 5 (index 5 is not
	// live any more) and 0 (index 0 is: another live subtask writes it).
	down := base()
	down.Generation, down.Succeeds, down.Pending = 1, []int{0, 1, 5}, []Committable{pending}
	// Scaled up: subtask 1 succeeds nobody; another subtask owns old 1's
	// staged files, but only this one writes in-progress files of index 1.
	up := base()
	up.Generation, up.Parallelism = 1, 4
	for _, c := range []tc{
		{"fresh", fresh, []string{".part-sub1-old1-3.csv.inprogress", ".part-sub1-old1-5.csv.staged", ".part-sub1-old1-5-1.csv.staged", ".part-sub1-old2-7.csv.staged"}},
		{"restored", restored, []string{".part-sub1-old1-3.csv.inprogress", ".part-sub1-old1-5.csv.staged", ".part-sub1-old1-5-1.csv.staged"}},
		{"scaled down", down, []string{".part-sub1-old1-3.csv.inprogress", ".part-sub1-old1-5.csv.staged", ".part-sub1-old1-5-1.csv.staged", ".part-sub5-old1-2.csv.inprogress", ".part-sub5-old1-4.csv.staged"}},
		{"scaled up", up, []string{".part-sub1-old1-3.csv.inprogress"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range files {
				writeFile(t, filepath.Join(dir, f), "x\n")
			}
			newSink, err := NewSink[kv](dir, CSV, SinkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := newSink()
			ctx := c.ctx
			for i := range ctx.Pending {
				ctx.Pending[i].Dir = dir
			}
			if err := s.Open(ctx); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var want []string
			for _, f := range files {
				if !slices.Contains(c.remove, f) {
					want = append(want, f)
				}
			}
			slices.Sort(want)
			if got := names(t, dir); !slices.Equal(got, want) {
				t.Fatalf("after open the directory holds\n%q\nwant\n%q", got, want)
			}
		})
	}
}
