package state

// SharedFiles is where file-based backends (Pebble) put the files of their
// checkpoints: a file is stored once under its name and referenced by every
// checkpoint that still needs it (incremental checkpoints). The runtime
// provides it, backed by the checkpoint directory's shared/ folder.
type SharedFiles interface {
	// Put stores the local file at path in shared storage under name,
	// durably, unless a file of that name is already there. Names must be
	// unique for their content: a backend includes a token of its run. Put
	// may hard-link the file, so it must never change afterwards.
	Put(name, path string) error
	// Has reports whether a file of that name is stored. A backend calls
	// Has (or Put) for every file its checkpoint will list: the shared
	// files of one checkpoint keep them from being collected meanwhile.
	Has(name string) bool
	// Path returns the local path of a stored file, to read or hard-link.
	Path(name string) (string, error)
}

// NamedData is a small piece of backend-private state stored inline in the
// task snapshot (a manifest, options).
type NamedData struct {
	Name string
	Data []byte
}

// FileState is what a file-based backend persists for one checkpoint: the
// shared files it references, small inline files, and optionally key-group
// data of its own.
type FileState struct {
	KeyGroups []KeyGroupData
	Named     []NamedData
	Shared    []string
}

// FileCaptured is implemented by the captures of file-based backends; the
// runtime calls PersistFiles instead of Persist.
type FileCaptured interface {
	Captured
	PersistFiles(sf SharedFiles) (*FileState, error)
}

// FileRestorer is implemented by file-based backends; the runtime calls
// RestoreFiles instead of Restore, with the FileState of every old subtask
// whose key groups overlap the backend's range.
type FileRestorer interface {
	RestoreFiles(snaps []*FileState, sf SharedFiles) error
}
