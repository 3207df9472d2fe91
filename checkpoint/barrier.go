package checkpoint

import "fmt"

// ID numbers a checkpoint. Ids are allocated by the Coordinator, strictly
// increase within a job, and are never reused once a durable file names them.
// Zero is not a valid checkpoint id.
type ID uint64

// Mode selects how a multi-input task treats a barrier that has reached some
// of its inputs but not yet the others.
type Mode uint8

const (
	// Aligned pauses each input that delivered the barrier until every open
	// input has delivered it (Chandy-Lamport alignment).
	Aligned Mode = iota
	// Unaligned forwards the barrier on its first delivery and captures the
	// records that other inputs deliver before their copy of the barrier.
	Unaligned
)

// String returns "aligned" or "unaligned", the label values of
// clink_ckpt_mode_total.
func (m Mode) String() string {
	switch m {
	case Aligned:
		return "aligned"
	case Unaligned:
		return "unaligned"
	default:
		return fmt.Sprintf("mode(%d)", uint8(m))
	}
}

// ParseMode parses "aligned" or "unaligned".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "aligned":
		return Aligned, nil
	case "unaligned":
		return Unaligned, nil
	}
	return 0, fmt.Errorf("unknown checkpoint mode %q (want aligned or unaligned)", s)
}

// Barrier is the in-band marker that separates checkpoint ID's records from
// the next checkpoint's on every channel. It travels in the same FIFO order
// as records and watermarks.
type Barrier struct {
	ID ID
	// Terminal marks the final barrier a bounded source emits after its
	// input is exhausted. It is always handled as aligned.
	Terminal bool
	// Mode is stamped by the coordinator when the checkpoint is triggered.
	Mode Mode
}

// String formats the barrier for logs and test output.
func (b Barrier) String() string {
	s := fmt.Sprintf("barrier(%d,%s", b.ID, b.Mode)
	if b.Terminal {
		s += ",terminal"
	}
	return s + ")"
}
