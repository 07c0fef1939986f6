package torture

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"github.com/doppio-db/doppio/internal/certs"
)

// secureUser is the user the workloads and the harness act as in a secure
// cluster: root exists on every cluster and authenticates by its client
// certificate, so no login or password is needed.
const secureUser = certs.DevUser

// clusterCerts is the TLS material of a secure cluster, made for it at
// start: one certs directory every node reads (one node certificate names
// every node's address) and the client configurations of the harness.
type clusterCerts struct {
	dir string
	// user trusts the cluster's CA and presents root's client certificate:
	// the REST API authenticates root by it.
	user *tls.Config
	// node presents the node certificate, which the routes for nodes only
	// and etcd's client port accept.
	node *tls.Config
}

// makeCerts writes a CA, a node certificate for ips and root's client
// certificate into dir and loads the harness's client configurations.
func makeCerts(dir string, ips []string) (*clusterCerts, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := certs.CreateCA(dir, certs.Options{}); err != nil {
		return nil, err
	}
	if err := certs.CreateNode(dir, ips, certs.Options{}); err != nil {
		return nil, err
	}
	if err := certs.CreateClient(dir, secureUser, certs.Options{}); err != nil {
		return nil, err
	}
	user, err := certs.ClientTLS(dir, secureUser)
	if err != nil {
		return nil, err
	}
	if len(user.Certificates) == 0 {
		return nil, fmt.Errorf("%s has no client certificate for %s", dir, secureUser)
	}
	node, err := certs.ClientTLS(dir, "")
	if err != nil {
		return nil, err
	}
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.NodeCertFile), filepath.Join(dir, certs.NodeKeyFile))
	if err != nil {
		return nil, err
	}
	node.Certificates = []tls.Certificate{kp}
	return &clusterCerts{dir: dir, user: user, node: node}, nil
}
