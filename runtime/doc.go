// Package runtime executes a job graph in this process: it turns vertices
// (chains of operators joined by forward edges) into tasks, one goroutine
// per subtask, connects them with bounded channels that carry record
// batches, watermarks, barriers and end-of-input, and drives checkpoints
// through the pure coordinator and alignment cores of package checkpoint.
//
// What a caller (the typed API in package clink) must do:
//
//  1. Describe the job as a JobGraph: one Vertex per chain with a
//     constructor for its Source or Operator per subtask, and the Edges
//     between vertices. Partitioning is the upstream chain's business: it
//     chooses the target channel of each record batch through Outputs.
//  2. Make Chain.Snapshot cheap and detached: it runs on the task goroutine
//     at the barrier; the snapshot worker serialises and writes it later.
//  3. Call Execute. It returns nil when every task ended and the terminal
//     checkpoint completed, or when ctx is canceled; otherwise the first
//     task or checkpoint failure (the last one, once Config.Restart allows
//     no more restarts).
//  4. Make the Vertex constructors callable again: every restart builds
//     every task anew.
//
// The checkpoint protocol as the runtime carries it out:
//
//   - The driver triggers checkpoint N and injects its barrier into every
//     source task. A source takes it between two Produce calls, captures its
//     chain's snapshot (the offset of exactly the records emitted so far),
//     flushes, forwards the barrier and queues the snapshot on its worker.
//     While an unaligned barrier is pending at a task, its record batches go
//     into full channels without waiting (a source blocked on one is woken
//     when the barrier is injected): the barrier takes the priority lane and
//     overtakes them, so waiting for room would only delay it.
//   - A task with inputs hands each barrier to its checkpoint.Alignment. On
//     Forward it captures its snapshot, forwards the barrier, and, under an
//     unaligned checkpoint, keeps capturing the records that precede the
//     barrier on the other inputs before queuing the snapshot. The records a
//     priority barrier overtook are captured when it is popped, while they
//     are still queued, so the snapshot does not wait for a backpressured
//     queue to drain: a goroutine per input encodes them while the task goes
//     on, and the task processes each of them only once it is encoded. A chain that
//     implements ResumableOperator is interrupted inside a batch when a
//     priority barrier reaches the task (a Send blocked on a full output
//     goes over the capacity first): the task takes the barrier before the
//     batch's next record and captures the rest of the batch with what the
//     barrier overtook, so the snapshot does not wait for a slow batch
//     either.
//   - The snapshot worker writes the snapshot durably and only then acks;
//     the coordinator completes N when every task acked, the driver writes
//     COMPLETED-N and then notifies listeners. While no checkpoint is in
//     flight the driver has the store prepare the next one (its directory,
//     and its marker staged, synced), so that a checkpoint's path holds
//     neither of those syncs: its marker is a rename and a directory sync.
//
// When a task or a checkpoint fails, Config.Restart decides what follows
// (restart.go): Execute either returns the failure, or waits, rebuilds every
// task from the graph and restores the newest checkpoint the job completed.
// An attempt ends only after its tasks, snapshot workers and driver have
// stopped, so the next one sees every COMPLETED marker the last one wrote and
// numbers its checkpoints above every id the last one used. A fresh
// coordinator per attempt has no rewind floor, which is what
// checkpoint.Coordinator.Reset would give a long-lived one.
package runtime
