package partition

import (
	"encoding/binary"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// metaApplied is the partition metadata key holding the last applied SCN.
const metaApplied = "applied"

// Apply writes the effect of ws at scn into b: documents, auto-increment
// counters, the change-log entry, the remembered outcome and the applied
// SCN, all in one batch. It is
// a pure function of its inputs, so every replica applies the same bytes.
// encoded is ws.Encode(); its change-log part is stored as the log entry.
func Apply(b *storage.Batch, p keys.Partition, ws *WriteSet, encoded []byte, scn SCN) {
	dropped := false
	for _, w := range ws.Writes {
		if w.Op == OpDrop {
			dropped = true // its keys go with the ranges below
			continue
		}
		if w.Op == OpReplace {
			continue // its keys go with the ranges below, its new ones in applyReplace
		}
		k := p.Document(w.Table, w.Key)
		if w.After == nil {
			b.Delete(k)
			continue
		}
		b.Set(k, Record{Version: w.AfterVersion, SCN: scn, Mtime: ws.Mtime, Avro: w.After}.encode())
	}
	for _, c := range ws.Counters {
		b.Set(p.AutoIncrement(c.Table, c.Collection), binary.BigEndian.AppendUint64(nil, uint64(c.Value)))
	}
	for _, r := range ws.Index.Ranges {
		b.DeleteRange(r.Start, r.End)
		if dropped {
			b.Reclaim(r.Start, r.End)
		}
	}
	for _, k := range ws.Index.Deletes {
		b.Delete(k)
	}
	for _, e := range ws.Index.Puts {
		b.Set(e.Key, e.Value)
	}
	logEntry := encoded
	if ws.logLen > 0 && ws.logLen <= len(encoded) {
		logEntry = encoded[:ws.logLen] // the index part is not change data
	}
	b.Set(p.Log(scn.Generation, scn.Sequence), logEntry)
	b.Set(p.Meta(metaApplied), encodeSCN(scn))
	if ws.Load != nil {
		b.Set(p.Meta(metaLoadPrefix+ws.Load.To.Load), encodeLoadMark(ws.Load.To))
	}
	applyOutcomes(b, p, ws.Outcomes, ws.Mtime, scn)
	b.Notify(string(p.LogPrefix()))
}

func encodeSCN(s SCN) []byte {
	b := binary.BigEndian.AppendUint64(nil, s.Generation)
	return binary.BigEndian.AppendUint64(b, s.Sequence)
}

func decodeSCN(b []byte) (SCN, bool) {
	if len(b) != 16 {
		return SCN{}, false
	}
	return SCN{Generation: binary.BigEndian.Uint64(b), Sequence: binary.BigEndian.Uint64(b[8:])}, true
}
