// Package backupdir is the backup directory and the drivers behind
// `doppio backup` and `doppio restore`: it takes a backup of a running
// cluster into a directory and restores one into a new or empty database,
// through the public client and the nodes' /_cluster/{backup,restore}
// endpoints. The node side of the stream is internal/backup.
//
// A backup is DIR/{id}/manifest.json and DIR/{id}/p{N}/{nnnnnn}.sst. The
// manifest names the database, its partition count and the schemas of its
// tables (every version), and per partition the SCN its tables hold, the
// files with their sizes and SHA-256, and whether they are a full copy or
// apply on top of the previous backup of the chain (IncrementalTo).
package backupdir
