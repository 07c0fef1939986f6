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
// entry per document (see pending.go), which a fold turns into the term
// entries above; Entries gives the final form (backfills write it).
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
package index
