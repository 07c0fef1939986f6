// Package client is the Go client of Doppio's REST API.
//
// A Client is safe for concurrent use. Every method takes a context first and
// returns a *Error for any answer the server gave as a problem document, so
// callers can branch with IsNotFound, IsConflict and IsPreconditionFailed or
// inspect the status and detail themselves.
//
// Keys are given as Key values ([]any of string, int, int32 or int64 parts).
// Each part becomes one percent-encoded URL segment, so a part may hold '/',
// ',', parentheses, spaces or any Unicode text; the server parses each
// segment by its table's key type. Keys the server returns hold string and
// int64 parts.
//
// Requests answered 503 (not ready, no leader) and requests that could not
// connect are retried with capped, jittered exponential backoff, honouring
// Retry-After, until a bounded total time (WithRetry, default 10s) has
// passed. Every
// Doppio write is idempotent to retry after a refused connection because the
// request never reached a server.
//
// Bulk loads: StartLoad has the cluster load a build directory (merge or
// replace), GetLoad and ListLoads follow it. Package client/bulkbuild
// writes such a directory from Go records, with the builder `doppio bulk
// build` uses; it is a package of its own because it links the Avro and
// Parquet libraries this one does without.
package client
