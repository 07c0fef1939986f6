package changes

import "github.com/doppio-db/doppio/internal/changes/checkpoint"

// Position and Checkpoint are the checkpoint format's types; the format
// lives in internal/changes/checkpoint, which the Go client shares.
type (
	Position   = checkpoint.Position
	Checkpoint = checkpoint.Checkpoint
)

// ErrMalformedCheckpoint is returned by ParseCheckpoint for anything that
// is not a checkpoint this package wrote.
var ErrMalformedCheckpoint = checkpoint.ErrMalformed

// ParseCheckpoint parses the wire form of a checkpoint.
func ParseCheckpoint(s string) (Checkpoint, error) { return checkpoint.Parse(s) }
