// Package clusterinfo reports the state of the cluster and of this node:
// GET /_cluster, assembled from every live node's report of its replicas
// (GET /_internal/replicas, on its peer listener) joined with the
// placements, and the node's storage and partition metrics at scrape time.
//
// Assembly is a pure function of the reports, the live nodes and the
// placements (Assemble); Reporter fetches the reports and Local builds
// this node's own. The cache tier's section (AddCache) is likewise a pure
// function of the nodes' read sides, the cacheable tables and the
// updaters' datastream statuses.
package clusterinfo
