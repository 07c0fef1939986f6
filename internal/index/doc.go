// Package index is Doppio's local secondary index: the Prefix Index of the
// Espresso paper (section 5.1).
//
// Every index entry is a key of the partition:
//
//	prefix 'i' table  partition-key  field  value-or-term  rest-of-document-key
//
// so the entries of one (collection, field) form a list sorted by value,
// then document key, and a query reads only the lists of the collection it
// asks about. Attribute entries have an empty value; text entries hold the
// term's positions for phrase matching.
//
// The write path calls Diff and writes the result in the same batch as the
// document, so queries see their own writes. Diff touches only the entries
// that change, and writes a text field's entries in the pending form, one
// entry per document (see pending.go), which a fold turns into a segment;
// Entries gives the term-per-key form (backfills write it).
//
// Execute runs a plan (operators And, Or, Not, Equal, Phrase, Range, Prefix,
// All; built by package query) over one collection: each list scanned gives a
// Roaring bitmap over per-query document ordinals, combined with bitmap
// algebra; a sort walks the sort field's list in value order; pages continue
// from a cursor that records the last position.
//
// ExecuteAll answers a query without a partition key in one partition: it
// visits every document group of the table (one seek past each), runs the
// same evaluation on each group's own lists from the point the global
// cursor leaves it at, and merges in one order extended by the whole
// document key; Merge merges the pages of several partitions, and its
// cursor continues on all of them.
//
// # Pending entries
//
// Diff writes a text field's entries in the pending form: one entry per
// document holding all its terms and positions, under the field's list
// (see PendingSpan), instead of one entry per term, so an insert writes one
// key for its text. The executor reads a collection's pending entries
// beside its term lists and segments, and a fold turns them into a segment
// later (see FoldSegment); a write of many documents turns its own into one
// at once. A text value that changes (or goes) is deleted in every form it
// may be in: the pending entry (rewritten, when the value changes), the
// term entries a backfill writes, and, when a fold put it in a segment, its
// folded entry, which Diff reads through its FoldedReader: it deletes it
// and writes the dead posting that hides the document's postings in that
// segment. An unchanged value is left in its form.
//
// # Segments
//
// Segments are the folded form of a text field's entries. A fold turns the
// pending entries of a document group (one per document, every term with
// its positions) into one segment: a posting block per distinct term,
// under the field's list, holding the documents of the fold that have the
// term, with their positions. A term's postings then cost keys, memtable
// inserts, flushes and compactions per fold, not per document. This is
// the segment of Lucene, per document group: immutable once written, with
// deletions recorded beside it.
//
// Within the list, after the term entries (tagString):
//
//	folded entry  list tagFolded rest                         -> segment id (8 bytes) + the document's pending value
//	posting block list tagSegment string(term) segment id     -> for each document in key order: uvarint len, rest, uvarint len, positions
//	dead posting  list tagDead segment id rest                -> (empty)
//
// A folded document keeps its terms in a folded entry, the pending entry
// moved under another tag with the id of its segment: a probing walk
// decides a document by it, and a write that changes or removes the text
// reads it to learn which segment holds the document's postings, deletes it
// and writes a dead posting for (segment, document). Queries skip the dead
// postings of a block. A document is thus in one of the pending, folded or
// term-key forms (or in the term-key form and one other, when a backfill
// met it: both say the same), and the next change of its text removes
// every one.
package index
