package state

import "io"

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

// SharedWriter is implemented by SharedFiles that store a file from what a
// function writes, so that a backend whose state is in memory (the memory
// backend's incremental checkpoints) writes each file once, into shared
// storage directly.
type SharedWriter interface {
	SharedFiles
	// Write stores what write writes under name, durably, unless a file of
	// that name is already there; like Put, it keeps the file from being
	// collected until the checkpoint it is for completes or is discarded.
	Write(name string, write func(w io.Writer) error) error
	// WriteUnpinned is Write for a file that a later checkpoint will list
	// (a background materialization): that checkpoint's Has pins it. Until
	// then the file may be collected, and Has then reports false.
	WriteUnpinned(name string, write func(w io.Writer) error) error
}
