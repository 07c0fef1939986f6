// Package wire holds the JSON bodies of the cluster-administration
// endpoints (GET /_cluster, GET /_internal/replicas, the consistency checks
// under /_cluster/check, the node intents under /_cluster/nodes and the
// bulk loads under /_bulk/loads): the server builds these types and the
// client decodes them, so the two sides cannot drift apart.
//
// The package imports only the standard library, so that the public
// client stays light. Field names and shapes are part of the API (the
// OpenAPI document describes them): change them only with that document.
package wire
