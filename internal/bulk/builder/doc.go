// Package builder turns input files into a bulk build directory (see
// package bulk): it validates every record against a table's schema at
// one version, partitions and sorts the valid ones, and writes one
// partition file per partition, the rejects file and the manifest.
//
// The loop: readers (one per input at a time) cut each input into
// batches of raw records; Workers workers validate and encode them as a
// PUT of the document would be, into sorted runs per partition that
// spill to temporary files past a memory bound; then each partition's
// runs are merged into its file. A key held by more than one record is
// written by none: every copy is rejected as a duplicate, so no input
// order decides a winner.
//
// The output is a function of the inputs alone: records are ordered by
// key, rejections by input and ordinal, so the worker count and the
// spill bound never change a byte.
//
// Malformed input (a JSON syntax error, broken CSV quoting, a damaged
// Avro or Parquet file) fails the build with an error naming the file
// and the position; a well-formed record that fails the schema is a
// rejection. A failed build removes what it wrote, and the manifest is
// written last, so no directory is left looking complete.
package builder
