// Package auth authenticates the callers of Doppio's REST API and decides
// what each may do: users and their per-database roles, password and
// token verification, and the caller a request carries.
//
// # Users
//
// Users live in etcd under the cluster's key prefix:
//
//	{prefix}/auth/users/{name}  JSON: password hash, credential generation, grants
//	{prefix}/auth/token-key     the HMAC-SHA256 key that signs session tokens
//
// Every node keeps a copy of all users in memory (Store), applied from an
// etcd watch as changes commit and re-read whole every ResyncInterval as a
// backstop. A deletion, a password change or a revoked grant therefore
// takes effect on every node within the watch's delivery time, and at
// worst within ResyncInterval (5 s by default) of its commit. A node whose
// copy has not been confirmed against etcd for MaxStale refuses every
// credential (503) rather than honour ones that may have been revoked.
//
// The built-in user root always exists with the root role; it cannot be
// deleted nor lose that role. It authenticates with a client certificate
// whose CommonName is root, or with a password once one is set.
//
// # Passwords
//
// A password is stored as an argon2id hash (RFC 9106) in the PHC string
// format, with a 16-byte random salt and, by default, the RFC's second
// recommended parameters: 3 passes over 64 MiB with 4 lanes, a 32-byte
// tag. The parameters are stored with each hash, so they can change
// without invalidating existing passwords. At most GOMAXPROCS hashes run
// at once: each holds its memory for its whole run.
//
// # Credentials
//
// Authenticator.Authenticate accepts "Authorization: Bearer" with a
// session token from Login, "Authorization: Basic", or, when the request
// has no Authorization header, a verified TLS client certificate whose
// CommonName names a user (never "node", the node certificates' name). A
// session token is
//
//	dpt1.{base64url(user)}.{generation}.{expiry, unix seconds}.{base64url(HMAC-SHA256)}
//
// signed over everything before its last dot; it is refused once expired,
// once its user is deleted, and once the user's password changes (which
// advances the user's credential generation). A Basic credential is
// verified with the slow hash once, then remembered by a keyed digest of
// the user and password, bound to the credential generation it was
// verified at: no request pays the slow hash twice. Each slow-hash
// verification (a login, a Basic credential not remembered) first takes a
// token from two buckets, the user's and the client address's, so
// guessing is rate limited per user and per address (429, Retry-After).
//
// # Roles and privileges
//
// A route needs exactly one Privilege; a user holds Grants. Per-database
// roles are ordered, each including the ones before it: read (documents,
// queries, the change stream, the schema), readWrite (writes), dbAdmin
// (schema changes, indexes, drops). Cluster-wide roles: clusterAdmin
// (nodes, drain, checks, backup, restore, datastreams, bulk operations),
// userAdmin (users and grants), root (every privilege). Allows is the
// whole decision, a pure function of the caller, its grants, the
// privilege and the database.
package auth
