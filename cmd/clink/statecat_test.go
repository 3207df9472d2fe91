package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	api "github.com/clinkstream/clink"
	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
)

// writeCheckpoints makes a checkpoint directory with checkpoint 1 completed
// and checkpoint 2 written but not completed.
func writeCheckpoints(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for id := checkpoint.ID(1); id <= 2; id++ {
		snap := &store.TaskSnapshot{
			Checkpoint:     id,
			Task:           store.SnapshotName("map", 0),
			Subtask:        0,
			Parallelism:    1,
			MaxParallelism: 128,
			Operators: []store.OperatorSnapshot{{
				UID:        "map",
				OffsetText: fmt.Sprintf("offset-%d", id),
				Watermark:  store.NoWatermark,
			}},
		}
		if _, err := s.WriteSnapshot(id, snap.Task, snap.Marshal()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteCompleted(1); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestStateCatLists(t *testing.T) {
	dir := writeCheckpoints(t)
	code, out, errs := clink(t, "state-cat", dir)
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"chk-1/", "chk-2/", store.SnapshotName("map", 0)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStateCatOneCheckpoint(t *testing.T) {
	dir := writeCheckpoints(t)
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", "2")
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat --checkpoint 2: exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "offset-2") || strings.Contains(out, "offset-1") {
		t.Errorf("output does not show exactly checkpoint 2's snapshot:\n%s", out)
	}
}

func TestStateCatErrors(t *testing.T) {
	dir := writeCheckpoints(t)
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dir", []string{"state-cat"}, "clink state-cat: accepts 1 arg(s), received 0"},
		{"missing dir", []string{"state-cat", missing}, missing},
		{"checkpoint zero", []string{"state-cat", dir, "--checkpoint", "0"}, "--checkpoint must be at least 1"},
		{"not a number", []string{"state-cat", dir, "--checkpoint", "latest"}, `invalid argument "latest" for "--checkpoint"`},
		{"unknown checkpoint", []string{"state-cat", dir, "--checkpoint", "9"}, "9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := clink(t, tc.args...)
			if code == 0 {
				t.Fatal("exit 0, want non-zero")
			}
			if !strings.HasPrefix(errs, "clink state-cat: ") || !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q, want a clink state-cat error containing %q", errs, tc.want)
			}
		})
	}
}

// aggState is a value type state-cat cannot delimit.
type aggState struct {
	N    int64
	Last string
}

const (
	jobRecords = 1000
	jobKeys    = 50
	jobMaxPar  = 64
	farTimer   = int64(1) << 50
)

// runKeyedJob runs a bounded job with three keyed operators at parallelism
// 2 into a checkpoint directory and returns it with the id of its final
// checkpoint:
//   - "count" counts records per string key k000..k049 (20 each) and sets a
//     processing-time timer far in the future per key (never fired);
//   - "mod" counts records per integer key i%7;
//   - "agg" keeps a struct per string key, and the same timer.
func runKeyedJob(t *testing.T) (string, checkpoint.ID) {
	t.Helper()
	return runKeyedJobOn(t, "memory")
}

// runKeyedJobOn is runKeyedJob with the given state backend.
func runKeyedJobOn(t *testing.T, backend string) (string, checkpoint.ID) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	opts := api.Options{Parallelism: 2, MaxParallelism: jobMaxPar, CheckpointDir: dir, StateBackend: backend}
	switch backend {
	case "memory":
		// The snapshots hold the key groups (the tests read them).
		off := false
		opts.StateIncremental = &off
	case "memory-incremental":
		opts.StateBackend = "memory"
	}
	env, err := api.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	src := api.FromGenerator(env, "gen", api.GeneratorOptions{Count: jobRecords}, func(i int64) int64 { return i }).SetParallelism(1)
	byName := api.KeyBy(src, func(i int64) string { return fmt.Sprintf("k%03d", i%jobKeys) })
	count := api.KeyedProcess(byName, "count", api.KeyedProcessFunction[string, int64, int64, string]{
		ProcessElement: func(ctx *api.KeyedContext[string, int64], _ int64, _ *api.Collector[string]) error {
			n, _ := ctx.Value()
			ctx.SetValue(n + 1)
			ctx.RegisterProcessingTimeTimer(farTimer)
			return nil
		},
	})
	mod := api.Process(api.KeyBy(src, func(i int64) int64 { return i % 7 }), "mod",
		func(ctx *api.KeyedContext[int64, int64], _ int64, _ *api.Collector[string]) error {
			n, _ := ctx.Value()
			ctx.SetValue(n + 1)
			return nil
		})
	agg := api.KeyedProcess(byName, "agg", api.KeyedProcessFunction[string, int64, aggState, string]{
		ProcessElement: func(ctx *api.KeyedContext[string, aggState], i int64, _ *api.Collector[string]) error {
			s, _ := ctx.Value()
			ctx.SetValue(aggState{N: s.N + i, Last: fmt.Sprint(i)})
			ctx.RegisterProcessingTimeTimer(farTimer)
			return nil
		},
	})
	for i, s := range []api.Stream[string]{count, mod, agg} {
		api.SinkTo(s, fmt.Sprintf("sink%d", i), api.SinkFunc(func(string) error { return nil }))
	}
	if err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Resolve("latest")
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// operatorBlock returns the part of a --key output about one operator.
func operatorBlock(t *testing.T, out, op string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\noperator "+op+"\n")
	if !ok {
		t.Fatalf("output has no operator %s:\n%s", op, out)
	}
	block, _, _ := strings.Cut(rest, "\noperator ")
	return block
}

func TestStateCatKeyGroups(t *testing.T) {
	dir, id := runKeyedJob(t)
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", fmt.Sprint(id))
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat --checkpoint %d: exit %d, stderr %q", id, code, errs)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The key groups of "count" and their lines, checked against the values
	// the state package decodes and the key groups of their keys.
	var groups []state.KeyGroupData
	var count0 string // the totals line of count-0
	lines := 0
	for sub := range 2 {
		snap, err := st.ReadTaskSnapshot(id, fmt.Sprintf("count-%d", sub))
		if err != nil {
			t.Fatal(err)
		}
		entries, bytes := 0, 0
		for _, g := range snap.Operators[0].KeyGroups {
			groups = append(groups, state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data})
			entries += g.Entries
			bytes += len(g.Data)
		}
		if sub == 0 {
			count0 = fmt.Sprintf("    keyed state:    %d key groups, %d entries, %d bytes\n", len(snap.Operators[0].KeyGroups), entries, bytes)
		}
	}
	values, err := state.ReadValues[string, int64](groups, "value", jobMaxPar)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != jobKeys {
		t.Fatalf("the checkpoint holds %d keys, want %d", len(values), jobKeys)
	}
	keysIn := map[int]int{}
	for k, v := range values {
		if v != jobRecords/jobKeys {
			t.Errorf("key %s counts %d, want %d", k, v, jobRecords/jobKeys)
		}
		keysIn[state.KeyGroupFor(state.HashString(k), jobMaxPar)]++
	}
	for _, g := range groups {
		n := keysIn[g.KeyGroup]
		// A value and a timer set per key.
		want := fmt.Sprintf(": %d entries, %d bytes (value=%d, __timers_proc=%d)\n", 2*n, len(g.Data), n, n)
		re := regexp.MustCompile(`\n {6}kg +` + fmt.Sprint(g.KeyGroup) + regexp.QuoteMeta(want))
		if !re.MatchString(out) {
			t.Errorf("output lacks the line of key group %d ending %q", g.KeyGroup, want)
		}
		lines++
		delete(keysIn, g.KeyGroup)
	}
	if len(keysIn) != 0 {
		t.Errorf("keys in key groups no snapshot holds: %v", keysIn)
	}
	if got := strings.Count(operatorSection(out, "count"), "      kg "); got != lines {
		t.Errorf("%d key-group lines for operator count, want %d", got, lines)
	}

	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", fmt.Sprint(id), "--summary")
	if code != 0 || errs != "" {
		t.Fatalf("clink state-cat --summary: exit %d, stderr %q", code, errs)
	}
	if strings.Contains(out, "      kg ") || !strings.Contains(operatorSection(out, "count"), count0) {
		t.Errorf("--summary output lists key groups or lacks %q:\n%s", count0, out)
	}
}

// operatorSection returns the lines of the checkpoint view from "operator
// op" to the next operator or file.
func operatorSection(out, op string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "  operator "):
			in = l == "  operator "+op
		case !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStateCatIncrementalMemory reads a memory backend's incremental
// checkpoint: the key's values come from the merged chain of shared files.
func TestStateCatIncrementalMemory(t *testing.T) {
	dir, id := runKeyedJobOn(t, "memory-incremental")
	chk := fmt.Sprint(id)
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", chk)
	if code != 0 || errs != "" {
		t.Fatalf("state-cat --checkpoint %s: exit %d, stderr %q\n%s", chk, code, errs, out)
	}
	if !strings.Contains(out, "entries") || !strings.Contains(out, "(in the state backend's files)") {
		t.Errorf("state-cat --checkpoint %s does not show keyed state from the files:\n%s", chk, out)
	}
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "k007")
	if code != 0 || errs != "" {
		t.Fatalf("--key k007: exit %d, stderr %q", code, errs)
	}
	if got := operatorBlock(t, out, "count"); !strings.Contains(got, "value: int64 20 [8 bytes 1400000000000000]") ||
		!strings.Contains(got, fmt.Sprintf("__timers_proc: 1 timer at %d", farTimer)) {
		t.Errorf("operator count:\n%s\nwant the count 20 and the timer", got)
	}
}

func TestStateCatKey(t *testing.T) {
	dir, id := runKeyedJob(t)
	chk := fmt.Sprint(id)
	kg := func(h uint64) int { return state.KeyGroupFor(h, jobMaxPar) }

	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "k007")
	if code != 0 || errs != "" {
		t.Fatalf("--key k007: exit %d, stderr %q", code, errs)
	}
	g := kg(state.HashString("k007"))
	file := fmt.Sprintf("chk-%d/count-%d.snap", id, state.SubtaskForKeyGroup(g, jobMaxPar, 2))
	wantCount := fmt.Sprintf(`  string keys, max parallelism 64
  key "k007" is in key group %d (%s):
    value: int64 20 [8 bytes 1400000000000000]
    __timers_proc: 1 timer at %d
`, g, file, farTimer)
	if got := operatorBlock(t, out, "count"); got != wantCount {
		t.Errorf("operator count:\n%s\nwant:\n%s", got, wantCount)
	}
	// The struct value of "agg" cannot be delimited, but the key is the
	// only entry of its key group, so its bytes are shown.
	var agg aggState
	for i := int64(7); i < jobRecords; i += jobKeys {
		agg = aggState{N: agg.N + i, Last: fmt.Sprint(i)}
	}
	aggBytes := state.CodecFor[aggState]().Append(nil, agg)
	wantAgg := fmt.Sprintf(`  string keys, max parallelism 64
  key "k007" is in key group %d (chk-%d/agg-%d.snap):
    value: value of unknown type; the key is the table's only entry here, its value is %d bytes %x
    __timers_proc: 1 timer at %d
`, g, id, state.SubtaskForKeyGroup(g, jobMaxPar, 2), len(aggBytes), aggBytes, farTimer)
	if got := operatorBlock(t, out, "agg"); got != wantAgg {
		t.Errorf("operator agg:\n%s\nwant:\n%s", got, wantAgg)
	}
	wantMod := `  integer keys, max parallelism 64
  key "k007" cannot be read as one of its keys (integer keys), so this operator does not hold it
`
	if got := operatorBlock(t, out, "mod"); got != wantMod {
		t.Errorf("operator mod:\n%s\nwant:\n%s", got, wantMod)
	}

	// An integer: found in "mod"; as a string it is no key of "count".
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "3")
	if code != 0 || errs != "" {
		t.Fatalf("--key 3: exit %d, stderr %q", code, errs)
	}
	gi := kg(state.HashUint64(3))
	if want := fmt.Sprintf("  key \"3\" is in key group %d (chk-%d/mod-%d.snap):\n    value: int64 143 [8 bytes 8f00000000000000]\n",
		gi, id, state.SubtaskForKeyGroup(gi, jobMaxPar, 2)); !strings.Contains(operatorBlock(t, out, "mod"), want) {
		t.Errorf("operator mod lacks %q:\n%s", want, out)
	}
	if want := fmt.Sprintf("  key \"3\" not found in key group %d (", kg(state.HashString("3"))); !strings.Contains(operatorBlock(t, out, "count"), want) {
		t.Errorf("operator count lacks %q:\n%s", want, out)
	}

	// An unknown key: a clear line, exit 0.
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "zzz")
	if code != 0 || errs != "" {
		t.Fatalf("--key zzz: exit %d, stderr %q", code, errs)
	}
	gz := kg(state.HashString("zzz"))
	held := false
	for i := range jobKeys {
		held = held || kg(state.HashString(fmt.Sprintf("k%03d", i))) == gz
	}
	zzzCount := fmt.Sprintf("  key \"zzz\" not found in key group %d (no state in it)\n", gz)
	zzzAgg := zzzCount
	if held {
		file := fmt.Sprintf("chk-%d/%%s-%d.snap", id, state.SubtaskForKeyGroup(gz, jobMaxPar, 2))
		zzzCount = fmt.Sprintf("  key \"zzz\" not found in key group %d (%s)\n", gz, fmt.Sprintf(file, "count"))
		zzzAgg = fmt.Sprintf("  key \"zzz\" not found in key group %d (%s):\n", gz, fmt.Sprintf(file, "agg")) +
			"    value: value of unknown type; "
	}
	if !strings.Contains(operatorBlock(t, out, "count"), zzzCount) {
		t.Errorf("operator count lacks %q:\n%s", zzzCount, out)
	}
	if agg := operatorBlock(t, out, "agg"); !strings.Contains(agg, zzzAgg) || held && !strings.Contains(agg, "the key's bytes do not occur in them, so it is not there\n") {
		t.Errorf("operator agg does not rule the key out:\n%s", out)
	}
}

func TestStateCatKeyNeedsCheckpoint(t *testing.T) {
	dir := writeCheckpoints(t)
	code, _, errs := clink(t, "state-cat", dir, "--key", "k007")
	if code == 0 || !strings.HasPrefix(errs, "clink state-cat: ") || !strings.Contains(errs, "--key needs --checkpoint") {
		t.Fatalf("exit %d, stderr %q; want an error naming --key and --checkpoint", code, errs)
	}
	// A checkpoint without keyed state says so.
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", "1", "--key", "k007")
	if code != 0 || errs != "" || !strings.Contains(out, `key "k007": no operator of checkpoint 1 has keyed state`) {
		t.Fatalf("exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}

// TestStateCatDamagedKeyGroup checks that key-group data that does not
// parse is reported on its line and under --key, with a non-zero exit.
func TestStateCatDamagedKeyGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := &store.TaskSnapshot{
		Checkpoint: 1, Task: store.SnapshotName("count", 0), Parallelism: 1, MaxParallelism: 128,
		Operators: []store.OperatorSnapshot{{UID: "count", Watermark: store.NoWatermark, KeyGroups: []store.KeyGroupState{
			{KeyGroup: 5, Entries: 1, Data: []byte{9, 'v'}},
		}}},
	}
	if _, err := s.WriteSnapshot(1, snap.Task, snap.Marshal()); err != nil {
		t.Fatal(err)
	}
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", "1")
	if code == 0 || !strings.Contains(out, "      kg 5: 1 entry, 2 bytes (error: key group 5: table name is truncated)\n") ||
		!strings.Contains(errs, "1 key group of checkpoint 1 in "+dir+" could not be decoded") {
		t.Fatalf("exit %d, stderr %q, output:\n%s", code, errs, out)
	}
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", "1", "--key", "a")
	if code == 0 || !strings.Contains(out, "operator count\n  error: key group 5: table name is truncated\n") ||
		!strings.Contains(errs, "the keyed state of 1 operator of checkpoint 1") {
		t.Fatalf("--key: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}

// TestStateCatKeyPebble: the Pebble backend keeps keyed state in files,
// not in the snapshot; state-cat reads them, and its entries being
// delimited, shows every value, a struct's bytes included.
func TestStateCatKeyPebble(t *testing.T) {
	dir, id := runKeyedJobOn(t, "pebble")
	chk := fmt.Sprint(id)
	g := state.KeyGroupFor(state.HashString("k007"), jobMaxPar)
	code, out, errs := clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "k007")
	if code != 0 || errs != "" {
		t.Fatalf("--key k007: exit %d, stderr %q\n%s", code, errs, out)
	}
	file := fmt.Sprintf("chk-%d/count-%d.snap", id, state.SubtaskForKeyGroup(g, jobMaxPar, 2))
	wantCount := fmt.Sprintf(`  string keys, max parallelism 64
  key "k007" is in key group %d (%s):
    value: int64 20 [8 bytes 1400000000000000]
    __timers_proc: 1 timer at %d
`, g, file, farTimer)
	if got := operatorBlock(t, out, "count"); got != wantCount {
		t.Errorf("operator count:\n%s\nwant:\n%s", got, wantCount)
	}
	var agg aggState
	for i := int64(7); i < jobRecords; i += jobKeys {
		agg = aggState{N: agg.N + i, Last: fmt.Sprint(i)}
	}
	aggBytes := state.CodecFor[aggState]().Append(nil, agg)
	if want := fmt.Sprintf("    value: value of unknown type, %d bytes %x", len(aggBytes), aggBytes); !strings.Contains(operatorBlock(t, out, "agg"), want) {
		t.Errorf("operator agg lacks %q:\n%s", want, out)
	}
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", chk, "--key", "3")
	if code != 0 || errs != "" {
		t.Fatalf("--key 3: exit %d, stderr %q", code, errs)
	}
	gi := state.KeyGroupFor(state.HashUint64(3), jobMaxPar)
	if want := fmt.Sprintf("  key \"3\" is in key group %d (chk-%d/mod-%d.snap):\n    value: int64 143 [8 bytes 8f00000000000000]\n",
		gi, id, state.SubtaskForKeyGroup(gi, jobMaxPar, 2)); !strings.Contains(operatorBlock(t, out, "mod"), want) {
		t.Errorf("operator mod lacks %q:\n%s", want, out)
	}
	// The checkpoint view counts the entries per key group from the files.
	code, out, errs = clink(t, "state-cat", dir, "--checkpoint", chk)
	if code != 0 || errs != "" {
		t.Fatalf("--checkpoint: exit %d, stderr %q\n%s", code, errs, out)
	}
	if want := "(value=1, __timers_proc=2)"; !strings.Contains(out, want) || !strings.Contains(out, "(in the state backend's files)") {
		t.Errorf("checkpoint view lacks %q or the files note:\n%s", want, out)
	}
}
