// Package certs creates and reads the certificates of a secure Doppio
// cluster: one certificate authority, a node certificate every node presents
// to clients and to its peers, and client certificates that name a user.
//
// A certs directory holds, as CockroachDB's does:
//
//	ca.crt                the cluster's CA certificate (every process trusts it)
//	ca.key                the CA's key (only where certificates are made)
//	node.crt, node.key    the node certificate: CommonName "node", both server
//	                      and client authentication, a SAN per host or IP
//	client.USER.crt/.key  a client certificate whose CommonName is USER
//
// Keys are ECDSA P-256 in PKCS#8 PEM, written with mode 0600; certificates
// are PEM. Nothing is overwritten unless Options.Overwrite says so.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// File names in a certs directory.
const (
	CAFile       = "ca.crt"
	CAKeyFile    = "ca.key"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// NodeCommonName is the CommonName of every node certificate. It is not a
// user name: no user may be called "node", so a node certificate never
// authenticates a user.
const NodeCommonName = "node"

// Default lifetimes, after CockroachDB's: the CA outlives the certificates
// it signs, so that rotating a node or client certificate needs no new CA.
const (
	DefaultCALifetime     = 10 * 365 * 24 * time.Hour
	DefaultNodeLifetime   = 5 * 365 * 24 * time.Hour
	DefaultClientLifetime = 5 * 365 * 24 * time.Hour
)

// ErrExists is returned when a file to be written exists and
// Options.Overwrite is false.
var ErrExists = errors.New("certs: file exists (use --overwrite to replace it)")

// Options tune certificate creation; the zero value is the defaults.
type Options struct {
	// Lifetime of the certificate (default the Default*Lifetime of its kind).
	Lifetime time.Duration
	// Overwrite replaces existing files instead of failing with ErrExists.
	Overwrite bool
	// CAKey is the CA key's path when it is not dir/ca.key.
	CAKey string
	// Now is the clock (default time.Now); tests make expired certificates
	// with it.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) lifetime(def time.Duration) time.Duration {
	if o.Lifetime > 0 {
		return o.Lifetime
	}
	return def
}

func (o Options) caKey(dir string) string {
	if o.CAKey != "" {
		return o.CAKey
	}
	return filepath.Join(dir, CAKeyFile)
}

// ClientCertFile and ClientKeyFile name user's client certificate files.
func ClientCertFile(user string) string { return "client." + user + ".crt" }

// ClientKeyFile names user's client key file.
func ClientKeyFile(user string) string { return "client." + user + ".key" }

// userName is what a user name may be: it becomes a file name and a
// certificate's CommonName.
var userName = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,62}$`)

// ValidUser reports why name cannot be a user's name, or nil.
func ValidUser(name string) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("user name %q must be 1 to 63 letters, digits, '_', '.' or '-', not starting with '.' or '-'", name)
	}
	if name == NodeCommonName {
		return fmt.Errorf("user name %q is reserved for node certificates", name)
	}
	return nil
}

// CreateCA writes a new CA certificate and key into dir (created if
// needed).
func CreateCA(dir string, o Options) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(dir, CAFile), o.caKey(dir)
	if err := o.mayWrite(certPath, keyPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl, err := template(o, DefaultCALifetime, "Doppio CA")
	if err != nil {
		return err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return writePair(certPath, keyPath, der, key)
}

// CreateNode writes a node certificate for hosts (DNS names or IP
// addresses; at least one) signed by dir's CA. "localhost" and 127.0.0.1
// are not added implicitly: list them when clients connect that way.
func CreateNode(dir string, hosts []string, o Options) error {
	if len(hosts) == 0 {
		return errors.New("certs: a node certificate needs at least one host or IP address")
	}
	tmpl, err := template(o, DefaultNodeLifetime, NodeCommonName)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return sign(dir, filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile), tmpl, o)
}

// CreateClient writes a client certificate for user signed by dir's CA.
func CreateClient(dir, user string, o Options) error {
	if err := ValidUser(user); err != nil {
		return err
	}
	tmpl, err := template(o, DefaultClientLifetime, user)
	if err != nil {
		return err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return sign(dir, filepath.Join(dir, ClientCertFile(user)), filepath.Join(dir, ClientKeyFile(user)), tmpl, o)
}

// template is a leaf or CA certificate valid from an hour ago (for clocks a
// little behind) for lifetime.
func template(o Options, def time.Duration, cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := o.now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Doppio"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(o.lifetime(def)),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}, nil
}

func sign(dir, certPath, keyPath string, tmpl *x509.Certificate, o Options) error {
	if err := o.mayWrite(certPath, keyPath); err != nil {
		return err
	}
	ca, caKey, err := LoadCA(filepath.Join(dir, CAFile), o.caKey(dir))
	if err != nil {
		return err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writePair(certPath, keyPath, der, key)
}

// LoadCA reads a CA certificate and its key.
func LoadCA(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := ReadCertificate(certPath)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("certs: %s holds no PEM block", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", keyPath, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("certs: %s is not an ECDSA key", keyPath)
	}
	return cert, ek, nil
}

// ReadCertificate reads the first certificate of a PEM file.
func ReadCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", path)
	}
	return x509.ParseCertificate(blk.Bytes)
}

func (o Options) mayWrite(paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s", ErrExists, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writePair writes the key before the certificate, each through a
// temporary file renamed into place, so a reader never sees a certificate
// without its key or a half-written file.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
