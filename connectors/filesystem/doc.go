// Package filesystem owns clink's file connectors: an exactly-once sink
// that publishes part files atomically at checkpoint commits, a
// replayable source that reads files with per-file byte offsets, the csv
// and json record formats they share, and the staging code (PartFiles,
// Publisher, Committable) that other file-writing sinks (connectors/parquet)
// reuse.
//
// # Committed output
//
// The committed output of a sink writing to a directory is every file in
// it whose name does not start with "." or "_". A sink subtask writes its
// records to an in-progress file (.<prefix>-sub<N>-<run>-<seq><ext>.inprogress);
// at a checkpoint barrier it flushes, fsyncs and closes that file and
// renames it to its staged name (.<final>.staged, where final is
// <prefix>-sub<N>-<run>-<ckpt><ext>); when the checkpoint completes, the
// commit links the final name to the staged file (never replacing a file
// that has that name), fsyncs the directory and removes the staged name.
// The run token in every name is fresh at each open, so a rerun never
// publishes over an earlier run's file.
//
// A crash leaves hidden files behind: in-progress files, and staged files
// of checkpoints that never completed. They are never published. At open
// each subtask removes those of its sink that it owns (see
// PartFiles.Open), which assumes one job per output directory and prefix.
//
// # Durability
//
// Data files and the directory are fsynced at every barrier and commit,
// and the parent of every directory the sink creates is fsynced at open,
// unless the environment variable CLINK_STATE_FSYNC is "0" or "false", which
// turns off every fsync on clink's checkpoint path (for CI machines and
// benchmarks; a process crash is still survived, a power loss is not).
//
// # Using the sink
//
// The caller's duties:
//
//  1. Build the sink with NewSink, which checks the record type against the
//     format and the options against each other.
//  2. Pass it to clink.CommitTo. The framework (connector.Committer) calls
//     the verbs; nothing else may.
//  3. Read the output only by the committed-output rule above.
package filesystem
