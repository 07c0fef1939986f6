// Package operator carries out what an operator asks of a node and of the
// cluster's nodes: the intents cordon, drain and remove (POST
// /_cluster/nodes/{id}/{verb}), the leadership hand-off and the drain of a
// node that is stopping (SIGTERM, a rolling restart), and the rebalance
// metrics the active controller reports.
//
// The decisions are pure functions of their inputs (which node a leadership
// goes to, whether a drain may start, how many replicas a node holds) and
// are table-tested; Operator reads their inputs through the small
// interfaces of Config and writes their outcome to etcd or to the Raft
// groups hosted here.
package operator
