// Package connector holds the contracts between clink and the systems it
// reads and writes: replayable sources (Source, SourceReader) and the
// two-phase-commit sink framework (CommittingSink and the Committer that
// drives it), with its restore succession and commit-dispatch gate.
//
// A connector that gives exactly-once output implements CommittingSink: it
// supplies only the verbs (open, write, prepare a commit at a barrier,
// commit, abort, recover, a codec for its handles). The Committer owns the
// choreography: it persists each prepared handle in the subtask's operator
// state under _xo_pending_sub<N>_<ckpt>, commits the handles of a checkpoint
// once the checkpoint is durable (oldest first, subsuming earlier ones), and
// at open finalises every handle the restored subtask succeeds. Commits run
// on a dispatch goroutine, concurrently with the next interval's writes,
// behind a gate that the teardown retires.
package connector
