// Package consistency schedules, runs and records the consistency checks
// of the partitions a node leads: the background loop that checks each
// one every Config.Interval, the on-demand checks of POST /_cluster/check
// (run at each partition's leader, through POST /_internal/check on its
// node's peer listener), the last outcome per partition for /_cluster,
// and the check metrics. The check itself is replication.Member.Check.
//
// A partition's last outcome is kept in this node's memory and in etcd
// (Config.Prefix + "/checks/{db}/{partition}"), so that its next leader,
// after a failover, a transfer or a restart, still shows it and does not
// check it again before the interval is up. A partition never checked
// counts from the cluster's check epoch (Config.Prefix + "/checks-epoch"),
// written by the first loop to run.
package consistency
