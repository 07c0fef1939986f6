package datastream

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/problem"
)

// pems is a CA and a client certificate signed by it, as PEM text.
type pems struct{ ca, caKey, cert, key string }

func makePEMs(t *testing.T) pems {
	t.Helper()
	dir := t.TempDir()
	if err := certs.CreateCA(dir, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := certs.CreateClient(dir, "doppio", certs.Options{}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return pems{read(certs.CAFile), read(certs.CAKeyFile), read(certs.ClientCertFile("doppio")), read(certs.ClientKeyFile("doppio"))}
}

// sinkWith is a definition body whose sink has the given extra members.
func sinkWith(extra string) string {
	return `{"database":"shop","sink":{"type":"kafka","brokers":["127.0.0.1:9093"]` + extra + `}}`
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestParseRefusesBadSinkSecurity: bad PEM, a key without its
// certificate, an unknown or missing SASL mechanism, SASL without a
// username and PLAIN without TLS are refused, naming the field at fault.
func TestParseRefusesBadSinkSecurity(t *testing.T) {
	p := makePEMs(t)
	truncated := p.ca[:len(p.ca)/2] + "\n-----END CERTIFICATE-----\n"
	cases := []struct {
		name, extra, field, says string
	}{
		{"tls not an object", `,"tls":true`, "sink.tls", "JSON object"},
		{"tls unknown field", `,"tls":{"insecureSkipVerify":true}`, "sink.tls.insecureSkipVerify", "unknown field"},
		{"ca not PEM", `,"tls":{"ca":"hello"}`, "sink.tls.ca", "no PEM certificate"},
		{"ca a key", `,"tls":{"ca":` + js(p.key) + `}`, "sink.tls.ca", `"PRIVATE KEY", not a CERTIFICATE`},
		{"ca truncated", `,"tls":{"ca":` + js(truncated) + `}`, "sink.tls.ca", "not PEM certificates"},
		{"ca with trailing text", `,"tls":{"ca":` + js(p.ca+"garbage") + `}`, "sink.tls.ca", "after 1 certificate"},
		{"ca wrong type", `,"tls":{"ca":7}`, "sink.tls.ca", "wrong type"},
		{"cert not PEM", `,"tls":{"cert":"x","key":` + js(p.key) + `}`, "sink.tls.cert", "no PEM certificate"},
		{"key without cert", `,"tls":{"key":` + js(p.key) + `}`, "sink.tls.cert", "without the client certificate"},
		{"bad server name", `,"tls":{"serverName":"a b"}`, "sink.tls.serverName", `"a b"`},
		{"sasl not an object", `,"sasl":"scram"`, "sink.sasl", "JSON object"},
		{"sasl unknown field", `,"sasl":{"mechanism":"PLAIN","user":"u"}`, "sink.sasl.user", "unknown field"},
		{"unknown mechanism", `,"sasl":{"mechanism":"GSSAPI","username":"u","password":"p"}`, "sink.sasl.mechanism", `"GSSAPI" is not supported`},
		{"lower-case mechanism", `,"sasl":{"mechanism":"scram-sha-256","username":"u","password":"p"}`, "sink.sasl.mechanism", `"scram-sha-256" is not supported`},
		{"no mechanism", `,"sasl":{"username":"u","password":"p"}`, "sink.sasl.mechanism", "needs a mechanism"},
		{"no username", `,"sasl":{"mechanism":"SCRAM-SHA-256","password":"p"}`, "sink.sasl.username", "needs a username"},
		{"PLAIN without TLS", `,"sasl":{"mechanism":"PLAIN","username":"u","password":"p"}`, "sink.sasl.mechanism", "in clear"},
		{"password wrong type", `,"sasl":{"mechanism":"SCRAM-SHA-512","username":"u","password":1}`, "sink.sasl.password", "wrong type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(context.Background(), "s", []byte(sinkWith(c.extra)), fakeCatalog{})
			pe, ok := problem.As(err)
			if !ok || pe.Kind != problem.Malformed || pe.Field != c.field || !strings.Contains(pe.Detail, c.says) {
				t.Fatalf("Parse = %v (%+v); want 400 on %s saying %s", err, pe, c.field, c.says)
			}
		})
	}

	// Accepted: SCRAM without TLS, PLAIN with TLS, a TLS of system roots.
	for _, extra := range []string{
		`,"sasl":{"mechanism":"SCRAM-SHA-256","username":"u","password":"p"}`,
		`,"tls":{},"sasl":{"mechanism":"PLAIN","username":"u","password":"p"}`,
		`,"tls":{"ca":` + js(p.ca) + `,"cert":` + js(p.cert) + `,"key":` + js(p.key) + `,"serverName":"kafka.internal"}`,
	} {
		d, err := Parse(context.Background(), "s", []byte(sinkWith(extra)), fakeCatalog{})
		if err == nil {
			err = d.Sink.checkSecrets()
		}
		if err != nil {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

// TestSinkSecretsAreStoredButNeverShown, with a real etcd: the password
// and client key are stored with the definition and every answer shows
// them as "***"; an update that leaves them out (or sends "***") keeps
// them while the username is the same and the key matches the
// certificate; a refused update changes nothing.
func TestSinkSecretsAreStoredButNeverShown(t *testing.T) {
	cli := startEtcd(t)
	m := openManager(t, cli, "a", newFakeCluster(), &fakeLog{}) // no live node: no task runs
	defer m.Close()
	ctx := context.Background()
	p := makePEMs(t)
	stored := func() (Record, int64) {
		t.Helper()
		resp, err := cli.Get(ctx, m.defKey("s"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("stored record: %v %v", resp, err)
		}
		var r Record
		if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
			t.Fatal(err)
		}
		return r, resp.Kvs[0].ModRevision
	}
	put := func(extra string) error {
		t.Helper()
		d, err := Parse(ctx, "s", []byte(sinkWith(extra)), fakeCatalog{})
		if err != nil {
			t.Fatalf("Parse(%s): %v", extra, err)
		}
		_, _, err = m.Put(ctx, d)
		return err
	}
	tlsWith := func(key string) string {
		return `,"tls":{"ca":` + js(p.ca) + `,"cert":` + js(p.cert) + key + `}`
	}

	if err := put(tlsWith(`,"key":`+js(p.key)) + `,"sasl":{"mechanism":"SCRAM-SHA-512","username":"app","password":"s3cret"}`); err != nil {
		t.Fatal(err)
	}
	rec, _ := stored()
	if rec.Sink.SASL.Password != "s3cret" || rec.Sink.TLS.Key != p.key || rec.Sink.TLS.CA != p.ca {
		t.Fatalf("etcd holds %+v %+v", rec.Sink.SASL, rec.Sink.TLS)
	}
	shown := func(what string) {
		t.Helper()
		g, err := m.Get(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []View{g, l[0]} {
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "PRIVATE KEY") ||
				!strings.Contains(string(b), `"password":"***"`) || !strings.Contains(string(b), `"key":"***"`) ||
				!strings.Contains(string(b), `"username":"app"`) || !strings.Contains(string(b), `"cert":"-----BEGIN CERTIFICATE`) {
				t.Fatalf("%s: answer %s", what, b)
			}
		}
	}
	shown("created")
	v, err := m.Pause(ctx, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Sink.SASL.Password != Redacted || v.Sink.TLS.Key != Redacted {
		t.Fatalf("pause answer shows %+v %+v", v.Sink.SASL, v.Sink.TLS)
	}

	// Left out, or sent back as shown: kept.
	for _, extra := range []string{
		tlsWith("") + `,"sasl":{"mechanism":"SCRAM-SHA-256","username":"app"}`,
		tlsWith(`,"key":"***"`) + `,"sasl":{"mechanism":"SCRAM-SHA-256","username":"app","password":"***"}`,
	} {
		if err := put(extra); err != nil {
			t.Fatalf("update %s: %v", extra, err)
		}
		rec, _ := stored()
		if rec.Sink.SASL.Password != "s3cret" || rec.Sink.SASL.Mechanism != SASLScramSHA256 || rec.Sink.TLS.Key != p.key {
			t.Fatalf("after update %s etcd holds %+v", extra, rec.Sink.SASL)
		}
		shown("updated")
	}

	// Refused, changing nothing: another user without a password, a key
	// that is not the certificate's.
	_, before := stored()
	for _, c := range []struct{ extra, field, says string }{
		{`,"sasl":{"mechanism":"SCRAM-SHA-256","username":"other"}`, "sink.sasl.password", `user "other"`},
		{tlsWith(`,"key":` + js(p.caKey)), "sink.tls.key", "not the PEM private key of sink.tls.cert"},
	} {
		err := put(c.extra)
		pe, ok := problem.As(err)
		if !ok || pe.Kind != problem.Malformed || pe.Field != c.field || !strings.Contains(pe.Detail, c.says) {
			t.Errorf("update %s: %v; want 400 on %s saying %s", c.extra, err, c.field, c.says)
		}
		if _, rev := stored(); rev != before {
			t.Fatalf("a refused update changed the record (revision %d → %d)", before, rev)
		}
	}

	// A new password replaces the stored one; removing TLS drops the key.
	if err := put(`,"sasl":{"mechanism":"SCRAM-SHA-256","username":"other","password":"n3w"}`); err != nil {
		t.Fatal(err)
	}
	if rec, _ := stored(); rec.Sink.SASL.Password != "n3w" || rec.Sink.TLS != nil {
		t.Fatalf("etcd holds %+v, TLS %+v", rec.Sink.SASL, rec.Sink.TLS)
	}

	// A new stream has nothing to keep.
	for _, c := range []struct{ extra, field string }{
		{`,"sasl":{"mechanism":"SCRAM-SHA-256","username":"other"}`, "sink.sasl.password"},
		{`,"tls":{"cert":` + js(p.cert) + `}`, "sink.tls.key"},
	} {
		d, err := Parse(ctx, "t", []byte(sinkWith(c.extra)), fakeCatalog{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = m.Put(ctx, d)
		if pe, ok := problem.As(err); !ok || pe.Kind != problem.Malformed || pe.Field != c.field {
			t.Fatalf("a new stream %s: %v, want 400 on %s", c.extra, err, c.field)
		}
		if _, err := m.Get(ctx, "t"); !problem.Is(err, problem.NotFound) {
			t.Fatalf("the refused stream exists: %v", err)
		}
	}
}

// TestSinkSecuritySettingsBuildTheClient: the TLS settings give a
// configuration trusting exactly the CA, presenting the client
// certificate, checking the server name; each mechanism name maps to
// its franz-go mechanism.
func TestSinkSecuritySettingsBuildTheClient(t *testing.T) {
	p := makePEMs(t)
	cfg, err := (&SinkTLS{CA: p.ca, Cert: p.cert, Key: p.key, ServerName: "kafka.internal"}).config()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parseCertificates(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || !cfg.RootCAs.Equal(poolOf(ca[0])) || len(cfg.Certificates) != 1 || cfg.ServerName != "kafka.internal" {
		t.Fatalf("config %+v", cfg)
	}
	if cfg, err := (&SinkTLS{}).config(); err != nil || cfg.RootCAs != nil || len(cfg.Certificates) != 0 {
		t.Fatalf("empty TLS settings: %+v, %v (want the system's roots)", cfg, err)
	}
	for _, mech := range []string{SASLScramSHA256, SASLScramSHA512, SASLPlain} {
		m, err := (&SinkSASL{Mechanism: mech, Username: "u", Password: "p"}).mechanism()
		if err != nil || m.Name() != mech {
			t.Errorf("mechanism %s: %v, %v", mech, m, err)
		}
	}
	if _, err := (&SinkSASL{Mechanism: "X"}).mechanism(); err == nil {
		t.Errorf("mechanism X accepted")
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// TestTLSToAPlaintextListenerSaysSo: a sink with TLS dialing a listener
// that does not speak TLS fails at once with an error saying so, not a
// hang or a bare handshake error.
func TestTLSToAPlaintextListenerSaysSo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	def := Definition{Name: "s", Database: "shop", Sink: Sink{Type: "kafka", Brokers: []string{l.Addr().String()}, TLS: &SinkTLS{}}}
	s, err := newKafkaSink(def, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err = s.ensureTopics(ctx, []string{"shop"})
	if err == nil || !strings.Contains(err.Error(), "the broker did not answer in TLS (is it a plaintext listener?)") {
		t.Fatalf("ensureTopics over TLS to a plaintext listener: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the failure took %v", took)
	}
}
