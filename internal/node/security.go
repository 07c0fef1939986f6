package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/replication"
)

// transportSecurity is a process's TLS: the certificates of its certs
// directory, or nil when it runs insecure.
type transportSecurity struct {
	certs *certs.Loader
}

// openSecurity loads certsDir (secure mode) or, without one, checks that
// running insecure is allowed: on loopback addresses only, unless
// insecure says the operator chose it, which is logged loudly. etcd are
// the external etcd endpoints (https in secure mode); listens are the
// addresses (host:port or URLs) the process will listen on.
func openSecurity(certsDir string, insecure bool, log *slog.Logger, etcd []string, listens ...string) (*transportSecurity, error) {
	if certsDir != "" {
		if insecure {
			return nil, fmt.Errorf("a certs directory (%s) and insecure mode exclude each other", certsDir)
		}
		for _, ep := range etcd {
			if strings.HasPrefix(ep, "http://") {
				return nil, fmt.Errorf("secure mode: etcd endpoint %s is plaintext; give https:// endpoints", ep)
			}
		}
		l, err := certs.NewLoader(certsDir, log)
		if err != nil {
			return nil, fmt.Errorf("secure mode: %w", err)
		}
		return &transportSecurity{certs: l}, nil
	}
	return nil, CheckInsecure(insecure, log, listens...)
}

// CheckInsecure says whether a process without a certs directory may
// listen on listens (host:port or URLs): on loopback alone, unless
// insecure is the operator's explicit choice, which is logged loudly.
func CheckInsecure(insecure bool, log *slog.Logger, listens ...string) error {
	var exposed []string
	for _, a := range listens {
		if a != "" && !onLoopback(a) {
			exposed = append(exposed, a)
		}
	}
	if len(exposed) > 0 && !insecure {
		return fmt.Errorf("refusing to listen on %s without TLS: give a certs directory (--certs-dir; see `doppio cert`), or --insecure to run without TLS and authentication", strings.Join(exposed, ", "))
	}
	if insecure {
		log.Warn("RUNNING INSECURE: no TLS and no authentication on any link; anyone who reaches this process can read and change every database", "listening", listens)
	}
	return nil
}

// onLoopback reports whether addr (host:port, or a URL) names a
// loopback host; an empty or unspecified host listens everywhere.
func onLoopback(addr string) bool {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// secure reports whether the process runs in secure mode.
func (s *transportSecurity) secure() bool { return s != nil }

// reload re-reads the certificates now (SIGHUP).
func (s *transportSecurity) reload() error {
	if !s.secure() {
		return nil
	}
	return s.certs.Reload()
}

// serverTLS is the REST listener's TLS: HTTP/2 and HTTP/1.1 offered,
// client certificates verified when given (a user may authenticate by
// one); nil when insecure.
func (s *transportSecurity) serverTLS() *tls.Config {
	if !s.secure() {
		return nil
	}
	return s.certs.ServerConfig(tls.VerifyClientCertIfGiven, "h2", "http/1.1")
}

// apiConfig makes a secure node's API authenticate and authorize every
// request, and its requests to other nodes speak https with the node
// certificate: secure mode is TLS and authentication together.
func (s *transportSecurity) apiConfig(c api.Config) api.Config {
	if s.secure() {
		c.DialPeerTLS = s.certs.DialTLS
		c.Authenticate = true
	}
	return c
}

// peerClient is the client of other nodes' peer listeners: https with
// the node certificate in secure mode.
func (s *transportSecurity) peerClient() *peer.Client {
	if !s.secure() {
		return peer.NewClient(nil)
	}
	return peer.NewClient(s.certs.DialTLS)
}

// peerServerTLS is the peer listener's TLS: a node certificate of the
// cluster required, gRPC (h2) or HTTP/1.1 chosen by ALPN; nil when
// insecure.
func (s *transportSecurity) peerServerTLS() *tls.Config {
	if !s.secure() {
		return nil
	}
	return s.certs.PeerServerConfig(peer.ProtoGRPC, peer.ProtoHTTP)
}

// etcdTLS is the etcd client's TLS; nil when insecure.
func (s *transportSecurity) etcdTLS() *tls.Config {
	if !s.secure() {
		return nil
	}
	return s.certs.ClientConfig()
}

// replicationTLS is the node-to-node gRPC links' mutual TLS: the client
// side only, as the peer listener (peer.Mux) terminates TLS for the gRPC
// server.
func (s *transportSecurity) replicationTLS() *replication.TLS {
	if !s.secure() {
		return nil
	}
	return &replication.TLS{Client: s.certs.ClientConfig}
}

// certsDir is the certs directory, "" when insecure.
func (s *transportSecurity) certsDir() string {
	if !s.secure() {
		return ""
	}
	return s.certs.Dir()
}

// register exports doppio_insecure.
func (s *transportSecurity) register(r *prometheus.Registry) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "doppio_insecure",
		Help: "1 when this process runs without TLS and authentication (no certs directory), 0 in secure mode.",
	})
	if !s.secure() {
		g.Set(1)
	}
	r.MustRegister(g)
}
