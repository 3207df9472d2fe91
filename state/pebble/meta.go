package pebble

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clinkstream/clink/state"
)

// The inline part of a FileState: metaName holds the fileMeta, and
// filePrefix + name each small file of the checkpoint directory.
const (
	metaName   = "pebble.json"
	filePrefix = "files/"
	metaFormat = 1
)

// fileMeta describes a persisted checkpoint: the key groups it holds and
// the shared name of each of its data files.
type fileMeta struct {
	Format         int               `json:"format"`
	Start          int               `json:"keyGroupStart"`
	End            int               `json:"keyGroupEnd"`
	MaxParallelism int               `json:"maxParallelism"`
	Files          map[string]string `json:"files"` // local name → shared name
}

func (m fileMeta) encode() ([]byte, error) { return json.Marshal(m) }

func (m fileMeta) rng() state.KeyGroupRange { return state.KeyGroupRange{Start: m.Start, End: m.End} }

// checkpointDir is a persisted checkpoint decoded from its FileState: what
// it takes to rebuild the directory.
type checkpointDir struct {
	meta  fileMeta
	files map[string][]byte // small files by local name
}

// plainName reports whether name is a file name that stays in its
// directory.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}

// decodeFileState checks a FileState written by PersistFiles.
func decodeFileState(fs *state.FileState) (*checkpointDir, error) {
	if fs == nil {
		return nil, fmt.Errorf("no file state")
	}
	if len(fs.KeyGroups) > 0 {
		return nil, fmt.Errorf("it has key-group data, which pebble never writes")
	}
	d := &checkpointDir{files: map[string][]byte{}}
	haveMeta := false
	for _, n := range fs.Named {
		switch {
		case n.Name == metaName:
			if haveMeta {
				return nil, fmt.Errorf("%s is there twice", metaName)
			}
			haveMeta = true
			dec := json.NewDecoder(bytes.NewReader(n.Data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&d.meta); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", metaName, err)
			}
			if dec.More() {
				return nil, fmt.Errorf("decoding %s: data after the object", metaName)
			}
		case strings.HasPrefix(n.Name, filePrefix):
			name := n.Name[len(filePrefix):]
			if !plainName(name) || isShared(name) {
				return nil, fmt.Errorf("inline file %q has a bad name", name)
			}
			if _, dup := d.files[name]; dup {
				return nil, fmt.Errorf("inline file %q is there twice", name)
			}
			d.files[name] = n.Data
		default:
			return nil, fmt.Errorf("unknown inline data %q", n.Name)
		}
	}
	if !haveMeta {
		return nil, fmt.Errorf("%s is missing (not a pebble checkpoint?)", metaName)
	}
	m := d.meta
	if m.Format != metaFormat {
		return nil, fmt.Errorf("format %d, this version reads format %d", m.Format, metaFormat)
	}
	if m.MaxParallelism < 1 || m.MaxParallelism > state.MaxMaxParallelism || m.Start < 0 || m.Start > m.End || m.End > m.MaxParallelism {
		return nil, fmt.Errorf("key-group range [%d,%d) of max parallelism %d", m.Start, m.End, m.MaxParallelism)
	}
	shared := make(map[string]bool, len(fs.Shared))
	for _, s := range fs.Shared {
		shared[s] = true
	}
	for local, s := range m.Files {
		if !plainName(local) || !isShared(local) {
			return nil, fmt.Errorf("data file %q has a bad name", local)
		}
		if _, dup := d.files[local]; dup {
			return nil, fmt.Errorf("file %q is both inline and shared", local)
		}
		if !shared[s] {
			return nil, fmt.Errorf("data file %q is stored as %q, which the state does not reference", local, s)
		}
	}
	return d, nil
}
