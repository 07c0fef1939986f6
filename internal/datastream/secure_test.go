package datastream_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/datastream/streamcheck"
	"github.com/doppio-db/doppio/internal/kafkatest"
)

// TestDatastreamsOverTLSAndSASL runs datastreams against one real broker
// that demands SASL over TLS on one listener and a client certificate on
// another (kafkatest.StartSecure); its plaintext listener is the test's
// consumer's. SCRAM-SHA-256 over TLS, and mutual TLS, deliver every
// transaction in order as the plaintext stream does. A wrong password
// shows the SASL failure in the status, auto-pauses the partitions as any
// failing sink does, and delivers nothing; so does a CA that did not sign
// the broker's certificate, with the verification error. PLAIN without
// TLS is refused at PUT.
func TestDatastreamsOverTLSAndSASL(t *testing.T) {
	broker := kafkatest.StartSecure(t, kafkatest.Security{Users: map[string]string{"doppio": "doppio-secret"}})
	n := startNode(t)
	const partitions = 4
	setupShop(n, partitions)
	groups := streamcheck.GroupsPer(partitions, 2)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, topic := range []string{"scram.shop", "mtls.shop", "badpw.shop", "badca.shop"} {
		broker.CreateTopic(t, topic, 3, nil)
	}

	ca := broker.CACert(t)
	if err := certs.CreateClient(broker.CertsDir(), "doppio", certs.Options{}); err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := readFile(t, broker.CertsDir(), certs.ClientCertFile("doppio")), readFile(t, broker.CertsDir(), certs.ClientKeyFile("doppio"))
	otherCA := t.TempDir()
	if err := certs.CreateCA(otherCA, certs.Options{}); err != nil {
		t.Fatal(err)
	}
	def := func(prefix, addr string, tls, sasl any) map[string]any {
		sink := map[string]any{"type": "kafka", "brokers": []string{addr}, "topics": "per-database", "topicPrefix": prefix}
		if tls != nil {
			sink["tls"] = tls
		}
		if sasl != nil {
			sink["sasl"] = sasl
		}
		return map[string]any{"database": "shop", "sink": sink, "autoPause": map[string]any{"failures": 3, "resumeAfter": "60s"}}
	}
	scram := func(password string) map[string]any {
		return map[string]any{"mechanism": "SCRAM-SHA-256", "username": "doppio", "password": password}
	}

	// PLAIN without TLS: refused, nothing stored.
	st, h, b := n.do("PUT", "/_datastreams/plain", def("plain.", broker.SASLAddr(), nil, map[string]any{"mechanism": "PLAIN", "username": "doppio", "password": "doppio-secret"}))
	if code, field, detail := problemOf(t, h, b); st != 400 || code != 400 || field != "sink.sasl.mechanism" || !strings.Contains(detail, "in clear") {
		t.Fatalf("PLAIN without TLS: %d %s", st, b)
	}
	n.must(404, "GET", "/_datastreams/plain", nil)

	n.must(201, "PUT", "/_datastreams/scram", def("scram.", broker.SASLAddr(), map[string]any{"ca": ca}, scram("doppio-secret")))
	n.must(201, "PUT", "/_datastreams/mtls", def("mtls.", broker.MTLSAddr(), map[string]any{"ca": ca, "cert": clientCert, "key": clientKey, "serverName": "localhost"}, nil))
	n.must(201, "PUT", "/_datastreams/badpw", def("badpw.", broker.SASLAddr(), map[string]any{"ca": ca}, scram("wrong")))
	n.must(201, "PUT", "/_datastreams/badca", def("badca.", broker.SASLAddr(), map[string]any{"ca": readFile(t, otherCA, certs.CAFile)}, scram("doppio-secret")))
	var v datastream.View
	if err := json.Unmarshal(n.must(200, "GET", "/_datastreams/mtls", nil), &v); err != nil {
		t.Fatal(err)
	}
	if v.Sink.TLS == nil || v.Sink.TLS.Key != datastream.Redacted || v.Sink.TLS.Cert != clientCert {
		t.Fatalf("GET shows TLS %+v", v.Sink.TLS)
	}

	scramC := consume(t, broker.Addr(), "scram.shop")
	mtlsC := consume(t, broker.Addr(), "mtls.shop")
	refused := consume(t, broker.Addr(), "badpw.shop", "badca.shop")
	var nextID int64
	txns := writeRound(n, groups, 4, seed, &nextID)
	for name, c := range map[string]*streamcheck.Consumer{"SCRAM-SHA-256 over TLS": scramC, "mutual TLS": mtlsC} {
		evs := c.WaitFor(30*time.Second, name+": every transaction delivered", func(evs []event) (bool, string) { return delivered(evs, txns) })
		d, err := streamcheck.Dedupe(evs)
		if err == nil {
			err = streamcheck.Check(d, txns, true, false)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"scram", "mtls"} {
		waitStatus(t, n, name, 10*time.Second, func(p datastream.PartitionStatus) bool {
			return p.State == datastream.StateRunning && p.Lag.Transactions == 0 && p.LastError == nil
		})
	}

	// The refused streams say why, pause after their 3 failures, and
	// deliver nothing.
	for _, c := range []struct{ name, says, cause string }{
		{"badpw", `SASL SCRAM-SHA-256 authentication of user "doppio" failed (check sink.sasl)`, "SASL_AUTHENTICATION_FAILED"},
		{"badca", "the broker's certificate failed verification (check sink.tls.ca and sink.tls.serverName)", "x509: certificate signed by unknown authority"},
	} {
		st := waitStatus(t, n, c.name, 60*time.Second, func(p datastream.PartitionStatus) bool {
			return p.State == datastream.StateAutoPaused && p.Failures == 3
		})
		for _, p := range st.Partitions {
			if p.LastError == nil || !strings.Contains(p.LastError.Message, c.says) || !strings.Contains(p.LastError.Message, c.cause) ||
				p.Delivered != 0 || p.Checkpoint != "" && p.Lag.Transactions == 0 {
				t.Fatalf("%s: partition %d status %+v, error %+v; want its error saying %s: %s", c.name, p.Partition, p, p.LastError, c.says, c.cause)
			}
		}
		t.Logf("%s: %s", c.name, st.Partitions[0].LastError.Message)
	}
	if evs := refused.Events(); len(evs) != 0 {
		t.Fatalf("the refused streams delivered %d records", len(evs))
	}

	// The right password, sent to the refused stream, resumes it: it
	// delivers what it held.
	n.must(200, "PUT", "/_datastreams/badpw", def("badpw.", broker.SASLAddr(), map[string]any{"ca": ca}, scram("doppio-secret")))
	n.must(200, "POST", "/_datastreams/badpw/resume", nil)
	refused.WaitFor(30*time.Second, "the corrected stream delivers", func(evs []event) (bool, string) { return delivered(evs, txns) })
	adm := kadm.NewClient(broker.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offsets, err := adm.ListEndOffsets(ctx, "badca.shop")
	if err != nil {
		t.Fatal(err)
	}
	offsets.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("badca.shop partition %d holds %d records", o.Partition, o.Offset)
		}
	})
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
