package datastream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// Definition is what a user declares about a datastream. Its JSON form is
// the body of PUT /_datastreams/{name}.
type Definition struct {
	Name     string `json:"name"`
	Database string `json:"database"`
	// Tables selects the tables whose changes the stream carries; empty:
	// every table, including tables created later.
	Tables []string `json:"tables,omitempty"`
	// Partitions selects the partitions the stream reads; empty: all.
	Partitions []int     `json:"partitions,omitempty"`
	Sink       Sink      `json:"sink"`
	AutoPause  AutoPause `json:"autoPause"`
	// From is where a partition without a checkpoint starts: "now" (the
	// transactions committed from the stream's creation on), "earliest"
	// (the oldest transaction the change log retains) or "snapshot" (every
	// document of the tables as of one SCN, then the log after it).
	From string `json:"from"`
	// SnapshotRate bounds, with "from":"snapshot", the documents a
	// partition's snapshot delivers per second (0: unbounded), so a
	// snapshot does not crowd out the replica's and the brokers' work.
	SnapshotRate int `json:"snapshotRate,omitempty"`
}

// Sink is where a datastream delivers.
type Sink struct {
	Type    string   `json:"type"` // "kafka" or "redis"
	Brokers []string `json:"brokers"`
	// Addresses are a Redis sink's primary and then its replicas
	// (host:port): the cache tier the stream keeps in step.
	Addresses []string `json:"addresses,omitempty"`
	// Topics is "per-table" ({prefix}{db}.{table}) or "per-database"
	// ({prefix}{db}).
	Topics      string `json:"topics"`
	TopicPrefix string `json:"topicPrefix"`
	// Format of record values: "json" (the change event as GET /_changes
	// renders it), "avro" (the post-image, Avro binary at the table's
	// latest schema version; a delete is a tombstone) or "debezium-json"
	// (Debezium's envelope, keyed by the document key's struct).
	Format string `json:"format"`
	// Schemas, for debezium-json, puts the Kafka Connect schema beside
	// each key and value ({"schema":…,"payload":…}, JsonConverter's
	// schemas.enable); false sends the payloads alone. Default true.
	Schemas *bool `json:"schemas,omitempty"`
	// TopicPartitions and ReplicationFactor are used when a missing topic
	// is created; 0 leaves them to the broker's defaults.
	TopicPartitions   int `json:"topicPartitions,omitempty"`
	ReplicationFactor int `json:"replicationFactor,omitempty"`
	// TLS, when present, encrypts the connections to the brokers; SASL
	// authenticates the sink to them (see SinkTLS and SinkSASL).
	TLS  *SinkTLS  `json:"tls,omitempty"`
	SASL *SinkSASL `json:"sasl,omitempty"`
}

// AutoPause is the policy for a partition whose sink keeps failing: after
// Failures consecutive failures it is paused for ResumeAfter, then tried
// again.
type AutoPause struct {
	Failures    int      `json:"failures"`
	ResumeAfter Duration `json:"resumeAfter"`
}

// Duration is a time.Duration written as a Go duration string ("60s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Defaults.
const (
	DefaultFailures    = 5
	DefaultResumeAfter = Duration(60 * time.Second)
	FromNow            = "now"
	FromEarliest       = "earliest"
	FromSnapshot       = "snapshot"
	TopicsPerTable     = "per-table"
	TopicsPerDatabase  = "per-database"
	FormatJSON         = "json"
	FormatAvro         = "avro"
	// SinkRedis is the cache tier's updater (docs/design/cache.md).
	SinkRedis      = "redis"
	FormatDebezium = "debezium-json"
)

var (
	nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	// Kafka's legal topic characters.
	topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]*$`)
)

// ValidName reports whether s can name a datastream: a letter, then up to
// 63 letters, digits, '_', '-' or '.'.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Catalog is what validation needs of the schema catalog.
type Catalog interface {
	LookupDatabase(ctx context.Context, name string) (schema.Database, bool)
	LookupTable(ctx context.Context, db, table string) (*schema.Table, bool)
}

// Parse decodes and validates the body of PUT /_datastreams/{name}: every
// field is checked, defaults are filled, and the first problem found is a
// *problem.Error naming its field ("sink.brokers", "autoPause.failures").
// Unknown databases, tables and partitions are NotFound; anything else
// wrong is Malformed.
func Parse(ctx context.Context, name string, body []byte, cat Catalog) (Definition, error) {
	var d Definition
	if !ValidName(name) {
		return d, problem.Field(problem.Malformed, "name", "invalid datastream name %q: want a letter, then up to 63 letters, digits, '_', '-' or '.'", name)
	}
	top, err := object(body, "")
	if err != nil {
		return d, err
	}
	if err := known(top, "", "name", "database", "tables", "partitions", "sink", "autoPause", "from", "snapshotRate"); err != nil {
		return d, err
	}
	if raw, ok := top["name"]; ok {
		var n string
		if err := field(raw, "name", &n); err != nil {
			return d, err
		}
		if n != name {
			return d, problem.Field(problem.Malformed, "name", "the body names datastream %q but the path names %q", n, name)
		}
	}
	d.Name = name
	if err := field(top["database"], "database", &d.Database); err != nil {
		return d, err
	}
	if _, ok := top["database"]; !ok || d.Database == "" {
		return d, problem.Field(problem.Malformed, "database", "a datastream needs the database whose changes it carries")
	}
	if err := field(top["tables"], "tables", &d.Tables); err != nil {
		return d, err
	}
	if err := field(top["partitions"], "partitions", &d.Partitions); err != nil {
		return d, err
	}
	if err := field(top["from"], "from", &d.From); err != nil {
		return d, err
	}
	if err := field(top["snapshotRate"], "snapshotRate", &d.SnapshotRate); err != nil {
		return d, err
	}
	if err := parseSink(top["sink"], &d.Sink); err != nil {
		return d, err
	}
	if err := parseAutoPause(top["autoPause"], &d.AutoPause); err != nil {
		return d, err
	}
	if err := d.validate(); err != nil {
		return d, err
	}
	return d, d.resolve(ctx, cat)
}

// choice checks that *v is one of options, setting it to the first (the
// default) when empty.
func choice(v *string, field, name string, options ...string) error {
	if *v == "" {
		*v = options[0]
	}
	if slices.Contains(options, *v) {
		return nil
	}
	quoted := make([]string, len(options))
	for i, o := range options {
		quoted[i] = strconv.Quote(o)
	}
	last := len(quoted) - 1
	return problem.Field(problem.Malformed, field, "%s must be %s or %s, not %q", name, strings.Join(quoted[:last], ", "), quoted[last], *v)
}

// validate checks what needs no catalog and fills defaults.
func (d *Definition) validate() error {
	if err := choice(&d.From, "from", "from", FromNow, FromEarliest, FromSnapshot); err != nil {
		return err
	}
	switch {
	case d.SnapshotRate < 0 || d.SnapshotRate > 10_000_000:
		return problem.Field(problem.Malformed, "snapshotRate", "snapshotRate must be 1 to 10000000 documents per second (or 0 for unbounded), not %d", d.SnapshotRate)
	case d.SnapshotRate > 0 && d.From != FromSnapshot:
		return problem.Field(problem.Malformed, "snapshotRate", `snapshotRate applies to "from":"snapshot" only, not %q`, d.From)
	}
	for _, t := range d.Tables {
		if t == "" {
			return problem.Field(problem.Malformed, "tables", "tables has an empty name")
		}
	}
	d.Tables = sortedUnique(d.Tables)
	for _, p := range d.Partitions {
		if p < 0 {
			return problem.Field(problem.Malformed, "partitions", "partition %d is not a partition number", p)
		}
	}
	d.Partitions = sortedUnique(d.Partitions)
	s := &d.Sink
	switch s.Type {
	case "kafka":
	case SinkRedis:
		if err := s.validateRedis(); err != nil {
			return err
		}
		return d.AutoPause.validate()
	case "":
		return problem.Field(problem.Malformed, "sink.type", `the sink needs a type ("kafka" or "redis")`)
	default:
		return problem.Field(problem.Malformed, "sink.type", `sink type %q is not supported ("kafka" or "redis")`, s.Type)
	}
	if len(s.Brokers) == 0 {
		return problem.Field(problem.Malformed, "sink.brokers", "the Kafka sink needs at least one broker address (host:port)")
	}
	if err := checkHostPorts("sink.brokers", "broker", s.Brokers); err != nil {
		return err
	}
	if err := choice(&s.Topics, "sink.topics", "topics", TopicsPerTable, TopicsPerDatabase); err != nil {
		return err
	}
	if !topicRE.MatchString(s.TopicPrefix) || len(s.TopicPrefix) > 120 {
		return problem.Field(problem.Malformed, "sink.topicPrefix", "topic prefix %q may hold only letters, digits, '.', '_' and '-' (at most 120)", s.TopicPrefix)
	}
	if err := choice(&s.Format, "sink.format", "format", FormatJSON, FormatAvro, FormatDebezium); err != nil {
		return err
	}
	if s.Schemas != nil && s.Format != FormatDebezium {
		return problem.Field(problem.Malformed, "sink.schemas", "schemas applies to format %q only, not %q", FormatDebezium, s.Format)
	}
	if s.TopicPartitions < 0 || s.TopicPartitions > 10000 {
		return problem.Field(problem.Malformed, "sink.topicPartitions", "topicPartitions must be 1 to 10000 (or 0 for the broker's default), not %d", s.TopicPartitions)
	}
	if s.ReplicationFactor < 0 || s.ReplicationFactor > 32767 {
		return problem.Field(problem.Malformed, "sink.replicationFactor", "replicationFactor must be 1 to 32767 (or 0 for the broker's default), not %d", s.ReplicationFactor)
	}
	if err := s.validateSecurity(); err != nil {
		return err
	}
	if len(s.Addresses) > 0 {
		return problem.Field(problem.Malformed, "sink.addresses", "addresses are a Redis sink's; a Kafka sink names brokers")
	}
	return d.AutoPause.validate()
}

// validateRedis checks a Redis sink: its addresses, and none of a Kafka
// sink's fields.
func (s *Sink) validateRedis() error {
	if len(s.Addresses) == 0 {
		return problem.Field(problem.Malformed, "sink.addresses", "the Redis sink needs the address of its primary (host:port), then its replicas'")
	}
	if err := checkHostPorts("sink.addresses", "address", s.Addresses); err != nil {
		return err
	}
	if len(s.Brokers) > 0 || s.Topics != "" || s.TopicPrefix != "" || s.Format != "" || s.TopicPartitions != 0 || s.ReplicationFactor != 0 || s.TLS != nil || s.SASL != nil {
		return problem.Field(problem.Malformed, "sink", "a Redis sink takes only type and addresses")
	}
	return nil
}

// checkHostPorts checks that every address is host:port.
func checkHostPorts(field, what string, addrs []string) error {
	for i, b := range addrs {
		host, port, err := net.SplitHostPort(b)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return problem.Field(problem.Malformed, field, "%s %d (%q) is not host:port", what, i, b)
		}
	}
	return nil
}

// validate checks the policy and fills its defaults.
func (a *AutoPause) validate() error {
	if a.Failures == 0 {
		a.Failures = DefaultFailures
	}
	if a.Failures < 1 || a.Failures > 1000 {
		return problem.Field(problem.Malformed, "autoPause.failures", "failures must be 1 to 1000, not %d", a.Failures)
	}
	if a.ResumeAfter == 0 {
		a.ResumeAfter = DefaultResumeAfter
	}
	if a.ResumeAfter < Duration(100*time.Millisecond) || a.ResumeAfter > Duration(7*24*time.Hour) {
		return problem.Field(problem.Malformed, "autoPause.resumeAfter", "resumeAfter must be 100ms to 168h, not %s", time.Duration(a.ResumeAfter))
	}
	return nil
}

// resolve checks the database, tables and partitions against the catalog.
func (d *Definition) resolve(ctx context.Context, cat Catalog) error {
	db, ok := cat.LookupDatabase(ctx, d.Database)
	if !ok {
		return problem.Field(problem.NotFound, "database", "database %q does not exist", d.Database)
	}
	for _, t := range d.Tables {
		if _, ok := cat.LookupTable(ctx, d.Database, t); !ok {
			return problem.Field(problem.NotFound, "tables", "table %q does not exist in database %q", t, d.Database)
		}
	}
	for _, p := range d.Partitions {
		if p >= db.Partitions {
			return problem.Field(problem.NotFound, "partitions", "database %s has no partition %d (it has %d)", d.Database, p, db.Partitions)
		}
	}
	return nil
}

// Selects reports whether the stream reads partition p.
func (d *Definition) Selects(p int) bool {
	return len(d.Partitions) == 0 || slices.Contains(d.Partitions, p)
}

// PartitionList is the partitions the stream reads of a database of n.
func (d *Definition) PartitionList(n int) []int {
	if len(d.Partitions) > 0 {
		return slices.Clone(d.Partitions)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Topic names the topic of table's events.
func (d *Definition) Topic(table string) string {
	if d.Sink.Topics == TopicsPerDatabase {
		return d.Sink.TopicPrefix + d.Database
	}
	return d.Sink.TopicPrefix + d.Database + "." + table
}

// schemasOn reports whether debezium-json records carry their schemas.
func (s *Sink) schemasOn() bool { return s.Schemas == nil || *s.Schemas }

// sameRun reports whether two definitions run identically: tasks of a
// stream whose definition changed otherwise restart.
func sameRun(a, b Definition) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// --- strict decoding with precise field names ---

func object(raw json.RawMessage, at string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil {
		where := "the body"
		if at != "" {
			where = at
		}
		if err == nil {
			err = fmt.Errorf("null")
		}
		p := problem.New(problem.Malformed, "%s must be a JSON object: %v", where, err)
		p.Field = at
		return nil, p
	}
	if dec.More() {
		return nil, problem.Field(problem.Malformed, at, "data after the JSON object")
	}
	return m, nil
}

func known(m map[string]json.RawMessage, at string, names ...string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			return problem.Field(problem.Malformed, join(at, k), "unknown field %q (known: %v)", join(at, k), names)
		}
	}
	return nil
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// field decodes raw (absent: leaves v) into v, naming name on a type error.
func field(raw json.RawMessage, name string, v any) error {
	if raw == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return problem.Field(problem.Malformed, name, "%s has the wrong type: %s", name, typeError(err))
	}
	return nil
}

func typeError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("got a JSON %s, want %s", te.Value, goType(te.Type.String()))
	}
	return err.Error()
}

func goType(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int":
		return "an integer"
	case "[]string":
		return "an array of strings"
	case "[]int":
		return "an array of integers"
	case "bool":
		return "a boolean"
	}
	return t
}

func parseSink(raw json.RawMessage, s *Sink) error {
	if raw == nil {
		return problem.Field(problem.Malformed, "sink", `a datastream needs a sink ({"type":"kafka","brokers":[…]})`)
	}
	m, err := object(raw, "sink")
	if err != nil {
		return err
	}
	if err := known(m, "sink", "type", "brokers", "addresses", "topics", "topicPrefix", "format", "schemas", "topicPartitions", "replicationFactor", "tls", "sasl"); err != nil {
		return err
	}
	if err := parseTLS(m["tls"], &s.TLS); err != nil {
		return err
	}
	if err := parseSASL(m["sasl"], &s.SASL); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    any
	}{
		{"type", &s.Type}, {"brokers", &s.Brokers}, {"addresses", &s.Addresses}, {"topics", &s.Topics}, {"topicPrefix", &s.TopicPrefix},
		{"format", &s.Format}, {"schemas", &s.Schemas}, {"topicPartitions", &s.TopicPartitions}, {"replicationFactor", &s.ReplicationFactor},
	} {
		if err := field(m[f.name], "sink."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func parseAutoPause(raw json.RawMessage, a *AutoPause) error {
	if raw == nil {
		return nil
	}
	m, err := object(raw, "autoPause")
	if err != nil {
		return err
	}
	if err := known(m, "autoPause", "failures", "resumeAfter"); err != nil {
		return err
	}
	if err := field(m["failures"], "autoPause.failures", &a.Failures); err != nil {
		return err
	}
	if raw := m["resumeAfter"]; raw != nil {
		var s string
		if err := field(raw, "autoPause.resumeAfter", &s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return problem.Field(problem.Malformed, "autoPause.resumeAfter", "resumeAfter %q is not a positive duration (e.g. \"60s\")", s)
		}
		a.ResumeAfter = Duration(d)
	}
	return nil
}

// UnmarshalJSON reads a duration string (stored records).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func sortedUnique[T int | string](in []T) []T {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
