package datastream

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/doppio-db/doppio/internal/problem"
)

// SinkTLS makes the Kafka sink dial its brokers over TLS. Present, even
// empty, it turns TLS on: the brokers' certificates are then verified
// against CA, or against the system's roots when CA is empty.
type SinkTLS struct {
	// CA holds the PEM certificates that sign the brokers' certificates.
	CA string `json:"ca,omitempty"`
	// Cert (a PEM certificate chain) and Key (its PEM private key) are
	// presented to brokers that ask for a client certificate. Key is a
	// secret: answers show it as Redacted.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// ServerName is the name the brokers' certificates must carry; empty,
	// the host of the address dialed.
	ServerName string `json:"serverName,omitempty"`
}

// SinkSASL authenticates the Kafka sink to its brokers.
type SinkSASL struct {
	// Mechanism is SASLScramSHA256, SASLScramSHA512 or SASLPlain; PLAIN
	// sends the password as it is, so it is accepted only with TLS.
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	// Password is a secret: stored with the definition, shown as Redacted.
	Password string `json:"password,omitempty"`
}

// SASL mechanisms.
const (
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLPlain       = "PLAIN"
)

// Redacted stands for a secret in answers. Sent back in a definition (or
// left out), it keeps the secret already stored: see Sink.keepSecrets.
const Redacted = "***"

// serverNameRE is a DNS name or an IPv4 address.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$`)

func parseTLS(raw json.RawMessage, out **SinkTLS) error {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	t := new(SinkTLS)
	if err := stringObject(raw, "sink.tls", member{"ca", &t.CA}, member{"cert", &t.Cert}, member{"key", &t.Key}, member{"serverName", &t.ServerName}); err != nil {
		return err
	}
	if t.Key == Redacted {
		t.Key = ""
	}
	*out = t
	return nil
}

func parseSASL(raw json.RawMessage, out **SinkSASL) error {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	a := new(SinkSASL)
	if err := stringObject(raw, "sink.sasl", member{"mechanism", &a.Mechanism}, member{"username", &a.Username}, member{"password", &a.Password}); err != nil {
		return err
	}
	if a.Password == Redacted {
		a.Password = ""
	}
	*out = a
	return nil
}

// member is a string member of a JSON object and where it is decoded.
type member struct {
	name string
	v    *string
}

// stringObject decodes raw, the object at path at, whose members are all
// strings and all among members.
func stringObject(raw json.RawMessage, at string, members ...member) error {
	m, err := object(raw, at)
	if err != nil {
		return err
	}
	names := make([]string, len(members))
	for i, f := range members {
		names[i] = f.name
	}
	if err := known(m, at, names...); err != nil {
		return err
	}
	for _, f := range members {
		if err := field(m[f.name], at+"."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// validateSecurity checks the TLS and SASL settings that need nothing
// stored: the secrets a definition may leave out are checked by
// checkSecrets once keepSecrets has filled them in.
func (s *Sink) validateSecurity() error {
	if t := s.TLS; t != nil {
		if t.CA != "" {
			if _, err := parseCertificates(t.CA); err != nil {
				return problem.Field(problem.Malformed, "sink.tls.ca", "sink.tls.ca is not PEM certificates: %v", err)
			}
		}
		if t.Cert != "" {
			if _, err := parseCertificates(t.Cert); err != nil {
				return problem.Field(problem.Malformed, "sink.tls.cert", "sink.tls.cert is not a PEM certificate chain: %v", err)
			}
		}
		if t.Cert == "" && t.Key != "" {
			return problem.Field(problem.Malformed, "sink.tls.cert", "sink.tls.key is given without the client certificate it belongs to")
		}
		if t.ServerName != "" && !serverNameRE.MatchString(t.ServerName) {
			return problem.Field(problem.Malformed, "sink.tls.serverName", "serverName %q is not a host name or IP address", t.ServerName)
		}
	}
	if a := s.SASL; a != nil {
		switch a.Mechanism {
		case SASLScramSHA256, SASLScramSHA512:
		case SASLPlain:
			if s.TLS == nil {
				return problem.Field(problem.Malformed, "sink.sasl.mechanism", "SASL PLAIN sends the password in clear: it needs sink.tls (or use %s)", SASLScramSHA512)
			}
		case "":
			return problem.Field(problem.Malformed, "sink.sasl.mechanism", "SASL needs a mechanism: %q, %q or %q", SASLScramSHA256, SASLScramSHA512, SASLPlain)
		default:
			return problem.Field(problem.Malformed, "sink.sasl.mechanism", "SASL mechanism %q is not supported (%q, %q or %q)", a.Mechanism, SASLScramSHA256, SASLScramSHA512, SASLPlain)
		}
		if a.Username == "" {
			return problem.Field(problem.Malformed, "sink.sasl.username", "SASL needs a username")
		}
	}
	return nil
}

// keepSecrets fills the secrets a new definition of the sink leaves out
// (or sends as Redacted) from cur, the stored one: the password while the
// SASL username is the same, the client key while the sink has a client
// certificate (checkSecrets then requires that they still match).
func (s *Sink) keepSecrets(cur *Sink) {
	if cur == nil {
		return
	}
	if a := s.SASL; a != nil && a.Password == "" && cur.SASL != nil && cur.SASL.Username == a.Username {
		a.Password = cur.SASL.Password
	}
	if t := s.TLS; t != nil && t.Cert != "" && t.Key == "" && cur.TLS != nil {
		t.Key = cur.TLS.Key
	}
}

// checkSecrets checks the secrets of a complete definition: SASL has a
// password, a client certificate has its key, and they match.
func (s *Sink) checkSecrets() error {
	if a := s.SASL; a != nil && a.Password == "" {
		return problem.Field(problem.Malformed, "sink.sasl.password", "SASL needs the password of user %q (none is stored for that user to keep)", a.Username)
	}
	if t := s.TLS; t != nil && t.Cert != "" {
		if t.Key == "" {
			return problem.Field(problem.Malformed, "sink.tls.key", "the client certificate in sink.tls.cert needs its private key (none is stored to keep)")
		}
		if _, err := tls.X509KeyPair([]byte(t.Cert), []byte(t.Key)); err != nil {
			return problem.Field(problem.Malformed, "sink.tls.key", "sink.tls.key is not the PEM private key of sink.tls.cert: %v", err)
		}
	}
	return nil
}

// clone copies the sink's security settings, which it holds by pointer.
func (s Sink) clone() Sink {
	if s.TLS != nil {
		t := *s.TLS
		s.TLS = &t
	}
	if s.SASL != nil {
		a := *s.SASL
		s.SASL = &a
	}
	return s
}

// redacted is the sink as answers show it: its secrets replaced by
// Redacted.
func (s Sink) redacted() Sink {
	s = s.clone()
	if s.TLS != nil && s.TLS.Key != "" {
		s.TLS.Key = Redacted
	}
	if s.SASL != nil && s.SASL.Password != "" {
		s.SASL.Password = Redacted
	}
	return s
}

// parseCertificates reads PEM text that holds certificates and nothing
// else.
func parseCertificates(text string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(text)
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("block %d is a %q, not a CERTIFICATE", len(out)+1, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("text that is not a PEM block after %d certificate(s)", len(out))
	}
	return out, nil
}

// config is the client TLS configuration the settings describe.
func (t *SinkTLS) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		certs, err := parseCertificates(t.CA)
		if err != nil {
			return nil, fmt.Errorf("sink.tls.ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		for _, cert := range certs {
			c.RootCAs.AddCert(cert)
		}
	}
	if t.Cert != "" {
		pair, err := tls.X509KeyPair([]byte(t.Cert), []byte(t.Key))
		if err != nil {
			return nil, fmt.Errorf("sink.tls: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// mechanism is the franz-go SASL mechanism the settings name.
func (a *SinkSASL) mechanism() (sasl.Mechanism, error) {
	switch a.Mechanism {
	case SASLScramSHA256:
		return scram.Auth{User: a.Username, Pass: a.Password}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: a.Username, Pass: a.Password}.AsSha512Mechanism(), nil
	case SASLPlain:
		return plain.Auth{User: a.Username, Pass: a.Password}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("sink.sasl: unknown mechanism %q", a.Mechanism)
}

// explain prefixes a Kafka error that comes from the sink's security
// settings with what to check, so the status says why at once.
func (s *Sink) explain(err error) error {
	if err == nil {
		return nil
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
	)
	switch {
	case s.SASL != nil && errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("kafka: SASL %s authentication of user %q failed (check sink.sasl): %w", s.SASL.Mechanism, s.SASL.Username, err)
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("kafka: TLS: the broker's certificate failed verification (check sink.tls.ca and sink.tls.serverName): %w", err)
	case errors.As(err, &record):
		return fmt.Errorf("kafka: TLS: the broker did not answer in TLS (is it a plaintext listener?): %w", err)
	}
	return err
}
