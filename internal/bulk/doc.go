// Package bulk holds the on-disk contract of an offline build: the
// manifest that describes a build directory and the partition files
// (.dpb) that carry each partition's documents in key order.
//
// A builder writes one partition file per partition with a Writer, in
// strictly increasing key order, and writes the manifest last, so a
// directory without manifest.json is never mistaken for a finished build.
// A loader reads the manifest, checks it with Manifest.Validate against
// the table it targets, checks every file with VerifyFile (or
// VerifyReader for a file served over HTTP) before applying anything,
// and iterates a file's records with a Reader. A Reader reports, after
// each record, the Position it reached; a loader that persists that
// Position resumes with NewReaderAt from exactly the next record, and the
// Reader still checks key order and the trailer's record count.
//
// The byte layout is specified in docs/design/bulk.md; every builder must
// produce byte-identical files from the same input.
package bulk
