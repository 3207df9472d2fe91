package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clinkstream/clink/checkpoint"
	"github.com/clinkstream/clink/checkpoint/store"
	"github.com/clinkstream/clink/state"
	"github.com/clinkstream/clink/state/pebble"
)

func newStateCatCmd() *cobra.Command {
	var (
		id      uint64
		summary bool
		key     string
	)
	cmd := &cobra.Command{
		Use:   "state-cat DIR",
		Short: "Print the checkpoints in a checkpoint directory",
		Long: `Print the contents of a checkpoint directory: its checkpoints, markers and
snapshots. With --checkpoint, only that checkpoint, with a line per key group
of keyed state: its entries, size and entries per table, e.g.

      kg 17: 42 entries, 1.2 KiB (value=40, __timers_event=2)

--summary leaves the key-group lines out.

With --key K (and --checkpoint), look K up in the keyed state of every
operator instead: print, per operator, the key group K belongs to and K's
entry in each table there, or "key K not found in key group G".

Snapshots do not record the types of keys and values, so --key reads K as
every key type it can be: a string, and, when K is a decimal integer, an
integer (any built-in integer type; named string types and named integer
types of kind int, int32, int64, uint, uint32 or uint64 are tried too).
Keys of other types (floats, structs, ...) cannot be looked up. The
operator's own entries tell which key type it has: a reading is accepted
only if every entry of a table, in every key group, decodes under it with
its key in the right key group.

With the Pebble state backend, keyed state lives in the checkpoint's
files rather than in its snapshots: state-cat reads them (rebuilding each
operator's database in a temporary directory, read-only) and lists their
key groups as keyed state "in the state backend's files". Their entries
are delimited, so --key finds a key's entries for certain and shows every
value, of a known type or not; a map state's entries (timers among them)
are listed one by one.

Values are delimited for the types the built-in codecs encode simply:
8-byte integers and float64, string and []byte, bool, float32, named
integer types, and []int64 or map[int64]struct{} (the timer tables). A
table whose values are of another type (a struct, another map, a window's
accumulators) is reported as "value of unknown type": its entries cannot
be delimited, so state-cat only tells whether K is its first entry in the
key group (showing the value's bytes when it is the only one) or whether
K's bytes occur in it at all. Values print as their possible decodings (an
8-byte value as int64, and as float64 when that is a normal number) with
their bytes in hex; when the checkpoint fits several value types, every
reading is printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := store.CatOptions{Summary: summary, DescribeKeyGroup: describeKeyGroup, FileKeyedState: fileKeyedState}
			var sel *checkpoint.ID
			if cmd.Flags().Changed("checkpoint") {
				if id == 0 {
					return errors.New("--checkpoint must be at least 1 (0 is not a checkpoint id)")
				}
				c := checkpoint.ID(id)
				sel = &c
			}
			if cmd.Flags().Changed("key") {
				if sel == nil {
					return errors.New("--key needs --checkpoint N: a key is looked up in one checkpoint")
				}
				opts.Key = &store.KeyLookup{Key: key, Find: func(ks store.KeyedState) ([]string, error) { return findKey(ks, key) }}
			}
			return store.Cat(cmd.OutOrStdout(), args[0], sel, opts)
		},
	}
	cmd.Flags().Uint64Var(&id, "checkpoint", 0, "print only checkpoint `N`")
	cmd.Flags().BoolVar(&summary, "summary", false, "with --checkpoint, total keyed state per operator without a line per key group")
	cmd.Flags().StringVar(&key, "key", "", "with --checkpoint, look up key `K` in every operator's keyed state")
	return cmd
}

// describeKeyGroup is store.CatOptions.DescribeKeyGroup: the entries per
// table of one key group, "value=40, __timers_event=2".
func describeKeyGroup(kg, entries int, data []byte, inFiles bool) (string, error) {
	g := state.KeyGroupData{KeyGroup: kg, Entries: entries, Data: data}
	tables, err := state.KeyGroupTables(g)
	if inFiles {
		tables, err = state.BytesKeyGroupTables(g)
	}
	if err != nil {
		return "", err
	}
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = fmt.Sprintf("%s=%d", t.Name, t.Entries)
	}
	return strings.Join(parts, ", "), nil
}

// findKey is store.KeyLookup.Find: the lines that say what one operator's
// keyed state holds for the key written as text.
func findKey(ks store.KeyedState, text string) ([]string, error) {
	groups := make([]state.KeyGroupData, len(ks.KeyGroups))
	fileOf := map[int]string{}
	for i, g := range ks.KeyGroups {
		groups[i] = state.KeyGroupData{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
		if _, ok := fileOf[g.KeyGroup]; !ok {
			fileOf[g.KeyGroup] = ks.Files[i]
		}
	}
	lookup := state.LookupKey
	if ks.InFiles {
		lookup = state.LookupBytesKey
	}
	res, err := lookup(groups, ks.MaxParallelism, text)
	if err != nil {
		return nil, err
	}
	var lines []string
	if len(res.KeyEncodings) == 0 {
		lines = append(lines, fmt.Sprintf("key type unknown (no table's entries could be delimited), max parallelism %d", ks.MaxParallelism))
	} else {
		lines = append(lines, fmt.Sprintf("%s keys, max parallelism %d", joinEncodings(res.KeyEncodings), ks.MaxParallelism))
	}
	if len(res.Searched) == 0 {
		return append(lines, fmt.Sprintf("key %q cannot be read as one of its keys (%s keys), so this operator does not hold it",
			text, joinEncodings(res.KeyEncodings))), nil
	}
	for _, r := range res.Searched {
		name := fmt.Sprintf("key %q", text)
		if len(res.Searched) > 1 {
			name += " as " + article(r.Encoding.String())
		}
		where := "no state in it"
		if f, ok := fileOf[r.KeyGroup]; ok {
			where = f
		}
		var matches []state.KeyMatch
		for _, m := range res.Matches {
			if m.Reading.Encoding == r.Encoding {
				matches = append(matches, m)
			}
		}
		// A key at the start of a table that cannot be delimited is
		// found all the same; one whose bytes occur later may be there.
		found, maybe := len(matches) > 0, false
		var unread []state.Undelimited
		for _, u := range res.Undelimited {
			if u.Reading.Encoding == r.Encoding {
				unread = append(unread, u)
				found = found || u.First
				maybe = maybe || u.At >= 0
			}
		}
		switch {
		case found:
			lines = append(lines, fmt.Sprintf("%s is in key group %d (%s):", name, r.KeyGroup, where))
		case maybe:
			lines = append(lines, fmt.Sprintf("%s not found in the tables of key group %d that could be read (%s):", name, r.KeyGroup, where))
		case len(unread) > 0:
			lines = append(lines, fmt.Sprintf("%s not found in key group %d (%s):", name, r.KeyGroup, where))
		default:
			lines = append(lines, fmt.Sprintf("%s not found in key group %d (%s)", name, r.KeyGroup, where))
		}
		// One line per table, in the order of the operator's tables.
		byTable := map[string][]string{}
		for _, m := range matchLines(matches) {
			byTable[m.table] = append(byTable[m.table], m.line)
		}
		for _, u := range unread {
			byTable[u.Table] = append(byTable[u.Table], unreadLine(u, ks.InFiles))
		}
		for _, t := range res.Tables {
			lines = append(lines, byTable[t.Name]...)
		}
	}
	return lines, nil
}

type tableLine struct{ table, line string }

// matchLines formats the entries found, one line per table; a table whose
// value type the checkpoint does not settle lists every reading.
func matchLines(matches []state.KeyMatch) []tableLine {
	var lines []tableLine
	for i := 0; i < len(matches); {
		j := i + 1
		for j < len(matches) && matches[j].Table == matches[i].Table && matches[j].KeyGroup == matches[i].KeyGroup && bytes.Equal(matches[j].MapKey, matches[i].MapKey) {
			j++
		}
		var vals []string
		for _, m := range matches[i:j] {
			v := state.DescribeValue(m.Table, m.Layout.Value, m.Value)
			if m.Written != 0 {
				v += fmt.Sprintf(", written at %d ms", m.Written)
			}
			vals = append(vals, v)
		}
		line := fmt.Sprintf("  %s%s: %s", matches[i].Table, mapKeyText(matches[i].Table, matches[i].MapKey), vals[0])
		if len(vals) > 1 {
			line = fmt.Sprintf("  %s (ambiguous: its entries fit %d value types): %s",
				matches[i].Table, len(vals), strings.Join(vals, " | "))
		}
		lines = append(lines, tableLine{matches[i].Table, line})
		i = j
	}
	return lines
}

// unreadLine formats a table whose entries could not be delimited.
func unreadLine(u state.Undelimited, inFiles bool) string {
	head := fmt.Sprintf("  %s: value of unknown type; ", u.Table)
	if inFiles && state.IsTimerTable(u.Table) && len(u.MapKey) == 8 && len(u.Value) == 0 {
		// A timer is an entry of a set: its key is the timestamp.
		return fmt.Sprintf("  %s: 1 timer at %d", u.Table, int64(binary.LittleEndian.Uint64(u.MapKey)))
	}
	if inFiles {
		// A byte-store backend's entries are delimited: the value is known,
		// only not its type.
		return fmt.Sprintf("  %s%s: value of unknown type, %s", u.Table, mapKeyText(u.Table, u.MapKey), state.DescribeUnknownValue(u.Value))
	}
	switch {
	case u.Value != nil:
		return head + "the key is the table's only entry here, its value is " + state.DescribeUnknownValue(u.Value)
	case u.First:
		return head + fmt.Sprintf("the key is the table's first entry here; its value and the %s after it take %d bytes that cannot be delimited",
			entriesText(u.Entries-1), u.Bytes-len(u.Reading.Bytes))
	case u.At >= 0:
		return head + fmt.Sprintf("%s in %d bytes could not be delimited; the key's bytes occur at byte %d, so it may be there",
			entriesText(u.Entries), u.Bytes, u.At)
	}
	return head + fmt.Sprintf("%s in %d bytes could not be delimited; the key's bytes do not occur in them, so it is not there",
		entriesText(u.Entries), u.Bytes)
}

// mapKeyText names the entry of a map state a line is about: " [timer at
// 1700]" for a timer, " [entry 8 bytes ...]" for another map; "" for a
// value that is not a map's.
func mapKeyText(table string, key []byte) string {
	if key == nil {
		return ""
	}
	if state.IsTimerTable(table) && len(key) == 8 {
		return fmt.Sprintf(" [timer at %d]", int64(binary.LittleEndian.Uint64(key)))
	}
	return " [entry " + state.DescribeUnknownValue(key) + "]"
}

// fileKeyedState is store.CatOptions.FileKeyedState: it reads the keyed
// state a Pebble backend keeps in the checkpoint's files, or merges the
// chain of files of a memory backend's incremental checkpoint.
func fileKeyedState(op *store.OperatorSnapshot, shared *store.Shared) (*store.FileKeyed, error) {
	fs := &state.FileState{}
	for _, n := range op.OperatorState {
		switch {
		case n.Name == store.SharedRefsState:
			fs.Shared = store.ParseSharedRefs(n.Data)
		case strings.HasPrefix(n.Name, store.FileEntryPrefix):
			fs.Named = append(fs.Named, state.NamedData{Name: strings.TrimPrefix(n.Name, store.FileEntryPrefix), Data: n.Data})
		}
	}
	if len(fs.Named) == 0 {
		return nil, nil
	}
	groups, maxPar, chain, err := state.ReadChain(fs, shared)
	if err != nil {
		return nil, err
	}
	if !chain {
		if groups, maxPar, err = pebble.ReadCheckpoint(fs, shared, ""); err != nil {
			return nil, err
		}
	}
	out := make([]store.KeyGroupState, len(groups))
	for i, g := range groups {
		out[i] = store.KeyGroupState{KeyGroup: g.KeyGroup, Entries: g.Entries, Data: g.Data}
	}
	return &store.FileKeyed{Groups: out, MaxParallelism: maxPar, SnapshotFormat: chain}, nil
}

// article prefixes a noun with "a" or "an".
func article(noun string) string {
	if strings.IndexByte("aeiou", noun[0]) >= 0 {
		return "an " + noun
	}
	return "a " + noun
}

func joinEncodings(encs []state.KeyEncoding) string {
	parts := make([]string, len(encs))
	for i, e := range encs {
		parts[i] = e.String()
	}
	return strings.Join(parts, " or ")
}

func entriesText(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
