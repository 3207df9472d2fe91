package state

import (
	"encoding/binary"
	"fmt"
)

// ReadValues decodes the value state table of one operator from the key
// groups of its snapshots (of every subtask, for the whole job's state),
// without a backend: for tools and tests that inspect checkpoints.
func ReadValues[K comparable, V any](groups []KeyGroupData, table string, maxParallelism int) (map[K]V, error) {
	kc, vc := CodecFor[K](), CodecFor[V]()
	hash := HasherFor(kc)
	out := map[K]V{}
	for _, g := range groups {
		secs, err := parseSections(g.KeyGroup, g.Data)
		if err != nil {
			return nil, err
		}
		for _, s := range secs {
			if s.name != table {
				continue
			}
			data := s.data
			for i := 0; i < s.entries; i++ {
				k, n, err := kc.Decode(data)
				if err != nil {
					return nil, fmt.Errorf("key group %d, table %q, entry %d: decoding key: %w", g.KeyGroup, table, i, err)
				}
				data = data[n:]
				v, n, err := vc.Decode(data)
				if err != nil {
					return nil, fmt.Errorf("key group %d, table %q, entry %d: decoding value: %w", g.KeyGroup, table, i, err)
				}
				data = data[n:]
				if _, n = binary.Varint(data); n <= 0 {
					return nil, fmt.Errorf("key group %d, table %q, entry %d: decoding write time: %w", g.KeyGroup, table, i, ErrShortBuffer)
				}
				data = data[n:]
				if kg := KeyGroupFor(hash(k), maxParallelism); kg != g.KeyGroup {
					return nil, fmt.Errorf("key group %d, table %q, entry %d: the key belongs to key group %d", g.KeyGroup, table, i, kg)
				}
				out[k] = v
			}
			if len(data) != 0 {
				return nil, fmt.Errorf("key group %d, table %q: %d bytes left after %d entries", g.KeyGroup, table, len(data), s.entries)
			}
		}
	}
	return out, nil
}

// TableEntries returns the number of entries per table name in one key
// group's data.
func TableEntries(g KeyGroupData) (map[string]int, error) {
	secs, err := parseSections(g.KeyGroup, g.Data)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(secs))
	for _, s := range secs {
		out[s.name] += s.entries
	}
	return out, nil
}
