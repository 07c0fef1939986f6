// Package bench measures the document API over real HTTP against a real
// node (embedded etcd, Pebble with synced writes), next to a no-op Go HTTP
// handler driven by the same client: the ceiling of this interface on the
// machine. Run: make bench (cd bench && go test -run '^$' -bench . -benchtime 3s .);
// -args -http-server=net-http serves the node with net/http alone.
package bench
