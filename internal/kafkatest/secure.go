package kafkatest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
)

// Listener names of a secure broker, besides PLAINTEXT and CONTROLLER.
const (
	// listenerSASL speaks SASL over TLS (SASL_SSL): SCRAM-SHA-256,
	// SCRAM-SHA-512 and PLAIN.
	listenerSASL = "SASL_SSL"
	// listenerMTLS speaks TLS and requires a client certificate of the
	// broker's CA (an SSL listener).
	listenerMTLS = "MTLS"
	// certsSubdir holds the broker's CA and node certificate.
	certsSubdir = "certs"
)

// Security describes the secured listeners StartSecure adds to a broker.
type Security struct {
	// Users maps user names to passwords. Each user can authenticate with
	// SCRAM-SHA-256, SCRAM-SHA-512 (credentials stored when the storage is
	// formatted) and PLAIN. Names and passwords are letters, digits, '_'
	// and '-', so they need no quoting in Kafka's configuration syntax.
	Users map[string]string
}

var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (s *Security) check() error {
	for u, p := range s.Users {
		if !plainToken.MatchString(u) || !plainToken.MatchString(p) {
			return fmt.Errorf("kafkatest: user %q: names and passwords must be letters, digits, '_' and '-'", u)
		}
	}
	return nil
}

// StartSecure starts a broker as Start does, with two listeners besides
// the plaintext one: SASLAddr (SASL_SSL, sec's users) and MTLSAddr (TLS
// requiring a client certificate). Both present a certificate for
// 127.0.0.1 and localhost signed by a CA made for the broker with
// internal/certs in CertsDir (ca.crt, ca.key), where a test can make
// client certificates with certs.CreateClient. The broker is stopped and
// its data removed when t ends.
func StartSecure(t testing.TB, sec Security) *Broker {
	t.Helper()
	start := time.Now()
	b, err := RunSecure(context.Background(), t.TempDir(), nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafkatest: Kafka %s broker serving on %s, SASL_SSL on %s, mutual TLS on %s after %v",
		Version, b.addr, b.saslAddr, b.mtlsAddr, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// RunSecure is Run for a broker with StartSecure's listeners. Run on its
// directory restarts it with them.
func RunSecure(ctx context.Context, dir string, logw io.Writer, sec Security) (*Broker, error) {
	if err := sec.check(); err != nil {
		return nil, err
	}
	return run(ctx, dir, logw, &sec)
}

// SASLAddr returns the address of the SASL_SSL listener, "" on a broker
// started without Security.
func (b *Broker) SASLAddr() string { return b.saslAddr }

// MTLSAddr returns the address of the listener that requires a client
// certificate, "" on a broker started without Security.
func (b *Broker) MTLSAddr() string { return b.mtlsAddr }

// CertsDir returns the directory holding the broker's CA (ca.crt, ca.key)
// and node certificate, "" on a broker started without Security.
func (b *Broker) CertsDir() string {
	if b.saslAddr == "" {
		return ""
	}
	return filepath.Join(b.dir, certsSubdir)
}

// CACert returns the PEM of the CA that signed the broker's certificate.
func (b *Broker) CACert(t testing.TB) string {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(b.CertsDir(), certs.CAFile))
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return string(pem)
}

// extraListeners is what a secure broker's configuration adds to the
// plaintext one's.
type extraListeners struct {
	listeners string // appended to listeners and advertised.listeners
	protocols string // appended to listener.security.protocol.map
	config    string // more lines
}

// secureConfig makes the broker's certificates under dir and returns the
// configuration of the secured listeners on saslPort and mtlsPort. The
// PEM is inline (ssl.keystore.key, ssl.keystore.certificate.chain,
// ssl.truststore.certificates): a PEM key store file needs an encrypted
// key, and internal/certs writes plain PKCS#8.
func secureConfig(dir string, sec *Security, saslPort, mtlsPort int) (*extraListeners, error) {
	cdir := filepath.Join(dir, certsSubdir)
	if err := certs.CreateCA(cdir, certs.Options{Overwrite: true}); err != nil {
		return nil, fmt.Errorf("kafkatest: CA: %w", err)
	}
	if err := certs.CreateNode(cdir, []string{"127.0.0.1", "localhost"}, certs.Options{Overwrite: true}); err != nil {
		return nil, fmt.Errorf("kafkatest: node certificate: %w", err)
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(cdir, name))
		return propertyValue(string(b)), err
	}
	ca, err := read(certs.CAFile)
	if err != nil {
		return nil, err
	}
	crt, err := read(certs.NodeCertFile)
	if err != nil {
		return nil, err
	}
	key, err := read(certs.NodeKeyFile)
	if err != nil {
		return nil, err
	}
	var plainUsers strings.Builder
	for _, u := range slices.Sorted(maps.Keys(sec.Users)) {
		fmt.Fprintf(&plainUsers, ` user_%s="%s"`, u, sec.Users[u])
	}
	sasl, mtls := strings.ToLower(listenerSASL), strings.ToLower(listenerMTLS)
	x := &extraListeners{
		listeners: fmt.Sprintf(",%s://127.0.0.1:%d,%s://127.0.0.1:%d", listenerSASL, saslPort, listenerMTLS, mtlsPort),
		protocols: fmt.Sprintf(",%s:SASL_SSL,%s:SSL", listenerSASL, listenerMTLS),
	}
	x.config = fmt.Sprintf(`ssl.keystore.type=PEM
ssl.keystore.certificate.chain=%[1]s
ssl.keystore.key=%[2]s
ssl.truststore.type=PEM
ssl.truststore.certificates=%[3]s
listener.name.%[4]s.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.%[4]s.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.%[4]s.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.%[4]s.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required%[5]s;
listener.name.%[6]s.ssl.client.auth=required
`, crt, key, ca, sasl, plainUsers.String(), mtls)
	return x, nil
}

// scramArgs are kafka-storage format's options that store sec's users'
// SCRAM credentials in the metadata log it creates.
func scramArgs(sec *Security) []string {
	var out []string
	for _, u := range slices.Sorted(maps.Keys(sec.Users)) {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			out = append(out, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u, sec.Users[u]))
		}
	}
	return out
}

// propertyValue escapes multi-line text as one Java properties value.
func propertyValue(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", `\n`)
}
