package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/doppio-db/doppio/internal/certs"
)

// TestSecureBrokerAuthenticatesUsersAndClientCertificates: a broker from
// StartSecure takes records over SASL_SSL from a user with each SCRAM
// mechanism and PLAIN, and over its mutual-TLS listener from a client
// with a certificate of its CA; it refuses a wrong password (SASL
// authentication failed) and a client without a certificate. What was
// taken is there, in order, for a plaintext consumer.
func TestSecureBrokerAuthenticatesUsersAndClientCertificates(t *testing.T) {
	const topic = "secure"
	b := StartSecure(t, Security{Users: map[string]string{"alice": "alice-secret"}})
	b.CreateTopic(t, topic, 1, nil)
	if err := certs.CreateClient(b.CertsDir(), "alice", certs.Options{}); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(b.CACert(t))) {
		t.Fatal("CACert is not PEM")
	}
	trust := &tls.Config{RootCAs: pool}
	clientCert, err := tls.LoadX509KeyPair(filepath.Join(b.CertsDir(), certs.ClientCertFile("alice")), filepath.Join(b.CertsDir(), certs.ClientKeyFile("alice")))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}

	produce := func(addr string, opts ...kgo.Opt) error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
			kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, kgo.StringRecord(addr)).FirstErr()
	}
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}
	var want []string
	for _, c := range []struct {
		name string
		addr string
		opts []kgo.Opt
	}{
		{"SCRAM-SHA-256", b.SASLAddr(), []kgo.Opt{kgo.DialTLSConfig(trust), kgo.SASL(alice.AsSha256Mechanism())}},
		{"SCRAM-SHA-512", b.SASLAddr(), []kgo.Opt{kgo.DialTLSConfig(trust), kgo.SASL(alice.AsSha512Mechanism())}},
		{"PLAIN", b.SASLAddr(), []kgo.Opt{kgo.DialTLSConfig(trust), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}},
		{"client certificate", b.MTLSAddr(), []kgo.Opt{kgo.DialTLSConfig(withCert)}},
	} {
		if err := produce(c.addr, c.opts...); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want = append(want, c.addr)
	}

	wrong := scram.Auth{User: "alice", Pass: "wrong"}
	if err := produce(b.SASLAddr(), kgo.DialTLSConfig(trust), kgo.SASL(wrong.AsSha256Mechanism())); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want %v", err, kerr.SaslAuthenticationFailed)
	}
	if err := produce(b.MTLSAddr(), kgo.DialTLSConfig(trust)); err == nil {
		t.Errorf("the mutual-TLS listener took a record from a client without a certificate")
	}
	var unknownCA x509.UnknownAuthorityError
	if err := produce(b.SASLAddr(), kgo.DialTLSConfig(&tls.Config{}), kgo.SASL(alice.AsSha256Mechanism())); !errors.As(err, &unknownCA) {
		t.Errorf("a client trusting only the system's roots: %v, want an unknown authority", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	consumer := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming after %q: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the topic holds %q, want %q", got, want)
	}
}
