// Package checkpoint holds the pure protocol cores of clink's checkpointing:
// the Barrier that flows in-band with records, the Coordinator that decides
// when a checkpoint completes, aborts or fails, the multi-input Alignment of
// a task, and the AdaptiveModePolicy that picks aligned or unaligned
// barriers from measured pressure.
//
// Nothing here does I/O, starts a goroutine or reads the clock. Events go in
// as method calls (time as an argument); decisions come out as return values
// or, for the Coordinator, as Effects collected until the caller has carried
// them out, the way etcd's raft package hands out a Ready. So the same core
// serves the in-process driver and the cluster coordinator, and tests can
// drive it step by step. None of the types is safe for concurrent use: each
// belongs to one goroutine.
//
// # Driving a Coordinator
//
//  1. Build it with NewCoordinator. Config.FirstID is the store's next id,
//     which lies above every id any durable file names, so ids are never
//     reused across incarnations.
//  2. Register every participant (one per task subtask) before triggering.
//     A checkpoint's pending set is the participants registered when it was
//     triggered.
//  3. On each interval, call Trigger(now, ...). On success inject the
//     returned Barrier into every source. ErrTooManyInFlight and
//     ErrRewinding mean "not now": skip this interval.
//  4. Feed every participant's outcome: Ack once its snapshot is durable,
//     Decline when it could not snapshot. Call Tick(now) regularly so
//     checkpoints past their deadline fail, and Abort for checkpoints given
//     up without a failure (shutdown).
//  5. After every event, carry out the effects Ready returns, in order, then
//     call Advance.
//  6. For WriteMarker, write COMPLETED-<id> durably, then call
//     MarkerWritten(id), or MarkerFailed(id, err) if the write failed.
//  7. For NotifyComplete, tell sinks and sources to commit the checkpoint,
//     and record its duration and size. For NotifyAborted, tell them it is
//     aborted; a reason wrapping ErrSubsumed follows the NotifyComplete of a
//     newer checkpoint whose commit already covers it.
//  8. For FailJob, restart the whole job from its last completed checkpoint
//     (several FailJobs before the restart make one restart). Until Reset,
//     markers may still complete, but no NotifyComplete is emitted: the
//     restarted job commits what it restores. Before choosing the restore
//     point, obtain the outcome of every WriteMarker already handed out, so
//     that no durable marker is missed. Once the restarted job is deployed,
//     call Reset(restoredFrom).
//
// # Driving an Alignment
//
// A task with several inputs owns one Alignment (a task with one input may
// use one too: it forwards at once).
//
//  1. Poll only inputs that are neither closed nor Paused.
//  2. Hand each barrier to OnBarrier and each end of input to
//     OnInputClosed; process records as usual.
//  3. On Forward, snapshot the task's state for Barrier.ID and emit Barrier
//     downstream, before processing anything else.
//  4. On UnalignedFirst, start capturing into checkpoint Barrier.ID's
//     snapshot the records each input in CaptureInputs delivers; Capturing
//     tells, per input, which checkpoints a record belongs to.
//  5. On CaptureDone, finalise the snapshots of those checkpoints with what
//     was captured, then acknowledge them.
package checkpoint
