// Package pebble is the state backend that keeps keyed state in an
// embedded Pebble LSM on local disk, for state larger than memory, with
// incremental checkpoints: a checkpoint uploads only the data files
// (sstables) that no earlier checkpoint uploaded.
//
// The typed states of package state (NewValue, NewList, NewMap,
// NewReducing, NewAggregating, and Timers on top of MapState) work on it
// unchanged: Backend implements state.BytesBackend, and they keep their
// entries in its state.BytesStore under keys that start with the key group
// (see state.KeyGroupPrefix). A cache of hot entries sits in front of
// Pebble, so that a read-modify-write of a recently used key costs a map
// lookup. A store error inside a typed method panics with a
// *state.StoreError; the runtime turns it into a job failure.
//
// The runtime drives a Backend from the operator's task goroutine, except
// where noted:
//
//  1. New, then Open with the subtask's key-group range.
//  2. To restore, RestoreFiles with the FileState of every old subtask
//     whose key groups overlap (and the SharedFiles they reference), before
//     any table is registered. With the same key groups as the one
//     snapshot, the checkpoint's DB becomes the working DB (its data files
//     are hard-linked from shared storage and are not uploaded again);
//     after a rescale, the entries of the backend's key groups are copied
//     out of each checkpoint.
//  3. Register tables (the typed constructors do) and use them.
//  4. At a checkpoint barrier, Capture: the cached writes are written to
//     Pebble, the memtable is flushed and the DB checkpointed into a
//     directory of hard links. Its cost is that of the writes since the
//     previous capture.
//  5. On the snapshot worker, PersistFiles of the capture (it implements
//     state.FileCaptured): new data files are Put into SharedFiles, small
//     files go inline into the FileState, and the capture's directory is
//     removed. Discard a capture that will not be persisted. Persist
//     (key-group data, read by Restore) is the non-incremental fallback.
//  6. Close, once no capture is being persisted: it removes the working
//     directory.
//
// A Backend never syncs its working files: they are scratch, since a
// failed task restores from a checkpoint. SharedFiles.Put must make what it
// stores durable itself, also when it links the file it is given.
package pebble
