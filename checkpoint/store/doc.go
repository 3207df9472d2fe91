// Package store owns the durable side of checkpoints: the layout of the
// checkpoint directory, the one helper through which every durable file is
// written (WriteFileDurable), the COMPLETED and CONFIRMED markers, the
// numbering of new checkpoint ids, retention, the snapshot file format
// (TaskSnapshot) and the `clink state-cat` view of it all (Cat).
//
// # Layout
//
// A checkpoint directory holds one job:
//
//	<dir>/chk-<N>/<name>.snap   one snapshot per task of checkpoint N; name is
//	                            "<operator-uid>-<subtask>" (SnapshotName)
//	<dir>/COMPLETED-<N>         checkpoint N is a restore point
//	<dir>/CONFIRMED-<N>         every sink whose commit cannot be repeated
//	                            has committed checkpoint N
//	<dir>/receipts/             commit receipts, created on first use
//	<dir>/shared/               files of incremental checkpoints (Pebble's
//	                            sstables), each listed by the snapshots
//	                            that need it (SharedRefsState)
//
// N is decimal without leading zeros. A file being written is named
// ".<final-name>.part" beside its final name, so a crash never leaves
// anything that looks like a snapshot or a marker; a marker that Prepare
// staged waits under that name until WriteCompleted renames it.
//
// All files go through WriteFileDurable: write a temp file, fsync it, close,
// rename, fsync the directory. Setting CLINK_STATE_FSYNC=0 (or false) drops
// both fsyncs; files then survive a process crash but not a power loss.
//
// # What the caller does
//
// Per checkpoint N (N from NextID at start, then strictly increasing):
//
//  1. Optionally, before N starts (no checkpoint in flight), the
//     coordinator calls Prepare(N): it makes chk-N and stages the
//     COMPLETED-N marker ahead, so that N does not wait for those syncs.
//  2. Each task writes its snapshot with WriteSnapshot (or
//     WriteTaskSnapshot, WriteSnapshotParts) and acks N only after it has
//     returned nil.
//  3. When every task has acked, the coordinator calls WriteCompleted(N).
//     It must not be called earlier: the marker is what makes N a restore
//     point, and restore trusts that every snapshot of N is on disk.
//     Files a task's snapshot of N will list go into shared/ through
//     SharedFor(N), before the snapshot is written.
//  4. If N is aborted instead, the coordinator calls Discard(N).
//  5. Once the sinks have committed N, a job whose sinks cannot repeat a
//     commit calls WriteConfirmed(N).
//  6. After each completed checkpoint the coordinator calls ApplyRetention
//     (or ApplyRetentionFloor with the newest confirmed id).
//
// To restore, call Resolve("latest" or "N") and then ReadTaskSnapshot for
// each task.
//
// # Invariants
//
//   - A COMPLETED-N marker never exists, even after a crash at any moment,
//     while a snapshot of N that was written before it is missing or
//     partial. Snapshots and the chk directory entry are synced before the
//     marker is written, and retention removes markers (and syncs) before
//     it removes snapshots.
//   - NextID is above every id that any durable name carries, including
//     chk directories of checkpoints that never completed, so ids are never
//     reused and two incarnations never mix files under one id.
//   - Retention never removes anything at or above the oldest checkpoint it
//     keeps.
//   - A shared file is deleted only when no remaining checkpoint lists it
//     and no checkpoint in flight has put or found it through SharedFor.
//     Retention deletes the files the purged checkpoints listed, those of
//     discarded checkpoints, and, once per Store, whatever an earlier
//     process left that nothing lists. The pins live in the Store: every
//     upload of a job must go through the Store that applies retention.
package store
