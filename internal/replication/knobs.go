package replication

// TestingKnobs let a test cut snapshots small and fail or stop their
// handling at chosen points. A nil *TestingKnobs, like the zero value, is
// production's behaviour.
type TestingKnobs struct {
	// SnapshotTableBytes, when positive, replaces about how many key and
	// value bytes one sstable of a snapshot this host sends holds.
	SnapshotTableBytes int
	// SnapshotChunk, when positive, replaces about how many bytes one
	// frame of a snapshot this host sends holds.
	SnapshotChunk int
	// OnSnapshotFrame, when set, sees the kind of every snapshot frame
	// this host receives before it is handled; an error fails the stream
	// there.
	OnSnapshotFrame func(kind byte) error
	// OnSnapshotIngest, when set, runs on the host's loop right before
	// (stage "before") and right after ("after") a snapshot's ingestion.
	OnSnapshotIngest func(stage string)
}

func (k *TestingKnobs) snapshotTableBytes() int {
	if k != nil && k.SnapshotTableBytes > 0 {
		return k.SnapshotTableBytes
	}
	return snapshotTableBytes
}

func (k *TestingKnobs) snapshotChunk() int {
	if k != nil && k.SnapshotChunk > 0 {
		return k.SnapshotChunk
	}
	return snapshotChunk
}

func (k *TestingKnobs) snapshotFrame(kind byte) error {
	if k == nil || k.OnSnapshotFrame == nil {
		return nil
	}
	return k.OnSnapshotFrame(kind)
}

func (k *TestingKnobs) snapshotIngest(stage string) {
	if k != nil && k.OnSnapshotIngest != nil {
		k.OnSnapshotIngest(stage)
	}
}
