package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// DefaultPollInterval is how often a Loader looks at its files' change
// times.
const DefaultPollInterval = 5 * time.Second

// Loader holds the current node certificate and CA of a certs directory
// and hands out TLS configurations that always use the current ones: a
// handshake after a successful reload presents the new certificate and
// trusts the new CA, with no restart and no new configuration. A reload
// that fails (a file missing, half written, a key not matching its
// certificate) keeps the material in use and logs why.
type Loader struct {
	dir string
	log *slog.Logger
	cur atomic.Pointer[material]
}

// material is one consistent reading of the directory.
type material struct {
	cert  tls.Certificate
	leaf  *x509.Certificate
	pool  *x509.CertPool
	stamp [3]fileStamp // ca.crt, node.crt, node.key
}

// fileStamp is what a change of a file changes.
type fileStamp struct {
	mod  time.Time
	size int64
}

// NewLoader reads dir's ca.crt, node.crt and node.key; it fails when they
// cannot be read or do not belong together.
func NewLoader(dir string, log *slog.Logger) (*Loader, error) {
	if log == nil {
		log = slog.Default()
	}
	l := &Loader{dir: dir, log: log}
	m, err := l.read()
	if err != nil {
		return nil, err
	}
	l.cur.Store(m)
	return l, nil
}

// Dir is the certs directory the loader reads.
func (l *Loader) Dir() string { return l.dir }

// Reload reads the directory again. On error the current material stays
// in use (the error says why, and is logged).
func (l *Loader) Reload() error {
	m, err := l.read()
	if err != nil {
		l.log.Error("certificates not reloaded; the current ones stay in use", "dir", l.dir, "err", err)
		return err
	}
	old := l.cur.Swap(m)
	if !old.leaf.Equal(m.leaf) {
		l.log.Info("certificates reloaded", "dir", l.dir, "serial", m.leaf.SerialNumber.Text(16), "expires", m.leaf.NotAfter.UTC())
	}
	return nil
}

// Watch reloads whenever a file's modification time or size changes, as
// seen every interval (DefaultPollInterval when 0), until ctx ends. A
// change is retried at every poll until a reload succeeds, so a rotation
// caught between two of its file writes completes at the next poll.
func (l *Loader) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := [3]fileStamp{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := l.stamps()
		if err != nil || now == l.cur.Load().stamp || now == failed {
			continue
		}
		if l.Reload() != nil {
			failed = now // logged once per change, not at every poll
		}
	}
}

// Leaf is the node certificate in use.
func (l *Loader) Leaf() *x509.Certificate { return l.cur.Load().leaf }

func (l *Loader) paths() [3]string {
	return [3]string{filepath.Join(l.dir, CAFile), filepath.Join(l.dir, NodeCertFile), filepath.Join(l.dir, NodeKeyFile)}
}

func (l *Loader) stamps() ([3]fileStamp, error) {
	var s [3]fileStamp
	for i, p := range l.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			return s, err
		}
		s[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return s, nil
}

func (l *Loader) read() (*material, error) {
	p := l.paths()
	// Stamps first: a change made while reading is seen at the next poll.
	stamp, err := l.stamps()
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	caPEM, err := os.ReadFile(p[0])
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", p[0])
	}
	cert, err := tls.LoadX509KeyPair(p[1], p[2])
	if err != nil {
		return nil, fmt.Errorf("certs: node certificate: %w", err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certs: %s is not signed by %s: %w", p[1], p[0], err)
	}
	return &material{cert: cert, leaf: leaf, pool: pool, stamp: stamp}, nil
}

// MinVersion is the oldest TLS version any configuration here accepts;
// Go negotiates TLS 1.3 whenever the other side offers it.
const MinVersion = tls.VersionTLS12

// ServerConfig is the configuration of a listener presenting the node
// certificate. Client certificates are asked for and verified against the
// current CA as auth says (tls.VerifyClientCertIfGiven for the REST
// port, where users may authenticate by certificate). nextProtos are
// offered through ALPN.
func (l *Loader) ServerConfig(auth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	return l.serverConfig(auth, nil, nextProtos)
}

// PeerServerConfig is the configuration of a listener only nodes of the
// cluster may use: the handshake fails unless the client presents a
// certificate of the current CA whose CommonName is NodeCommonName.
func (l *Loader) PeerServerConfig(nextProtos ...string) *tls.Config {
	return l.serverConfig(tls.RequireAndVerifyClientCert, requireNode, nextProtos)
}

func (l *Loader) serverConfig(auth tls.ClientAuthType, verify func(tls.ConnectionState) error, nextProtos []string) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := l.cur.Load()
			return &tls.Config{
				MinVersion:       MinVersion,
				NextProtos:       nextProtos,
				Certificates:     []tls.Certificate{m.cert},
				ClientCAs:        m.pool,
				ClientAuth:       auth,
				VerifyConnection: verify,
			}, nil
		},
	}
}

// ErrNotANode refuses a peer whose certificate is not a node certificate.
var ErrNotANode = errors.New("certs: the peer's certificate is not a node certificate")

func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].Subject.CommonName != NodeCommonName {
		return ErrNotANode
	}
	return nil
}

// ClientConfig is the configuration of a connection from this node to
// another node, an etcd member or a router's target: it presents the
// node certificate current at each handshake and trusts the CA current
// now. ServerName is left empty for net/http, gRPC or tls.Dialer to set
// from the address dialled; a caller that keeps the configuration for
// long (an etcd client) trusts a new CA once it makes a new one.
func (l *Loader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		RootCAs:    l.cur.Load().pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := l.cur.Load().cert
			return &c, nil
		},
	}
}

// DialTLS dials addr and completes a handshake with a fresh ClientConfig
// and addr's host as the server name, so every connection trusts the
// current CA: an http.Transport's DialTLSContext.
func (l *Loader) DialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: l.ClientConfig()}
	return d.DialContext(ctx, network, addr)
}

// ClientTLS is the configuration of a user's client (the CLI, a Go
// program): it trusts dir's ca.crt and presents user's client
// certificate when dir holds one (client.USER.crt and .key), so that the
// server authenticates the user by it; without one the connection is
// still TLS, and the user authenticates otherwise.
func ClientTLS(dir, user string) (*tls.Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", filepath.Join(dir, CAFile))
	}
	cfg := &tls.Config{MinVersion: MinVersion, RootCAs: pool}
	if user == "" {
		return cfg, nil
	}
	if err := ValidUser(user); err != nil {
		return nil, err
	}
	crt, key := filepath.Join(dir, ClientCertFile(user)), filepath.Join(dir, ClientKeyFile(user))
	if _, err := os.Stat(crt); errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	kp, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return nil, fmt.Errorf("certs: client certificate of %s: %w", user, err)
	}
	cfg.Certificates = []tls.Certificate{kp}
	return cfg, nil
}
