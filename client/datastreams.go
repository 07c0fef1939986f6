package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DatastreamSpec is the definition of a datastream: a pipeline from a
// database's change stream to a Kafka sink. Zero fields take the server's
// defaults.
type DatastreamSpec struct {
	Database   string         `json:"database"`
	Tables     []string       `json:"tables,omitempty"`
	Partitions []int          `json:"partitions,omitempty"`
	Sink       DatastreamSink `json:"sink"`
	AutoPause  *AutoPause     `json:"autoPause,omitempty"`
	From       string         `json:"from,omitempty"` // "now" (default), "earliest" or "snapshot"
	// SnapshotRate bounds a snapshot's documents per second per partition.
	SnapshotRate int `json:"snapshotRate,omitempty"`
}

// DatastreamSink is where a datastream delivers.
type DatastreamSink struct {
	Type    string   `json:"type"` // "kafka" or "redis" (the cache tier's updater)
	Brokers []string `json:"brokers"`
	// Addresses are a Redis sink's primary and then its replicas.
	Addresses         []string `json:"addresses,omitempty"`
	Topics            string   `json:"topics,omitempty"` // "per-table" (default) or "per-database"
	TopicPrefix       string   `json:"topicPrefix,omitempty"`
	Format            string   `json:"format,omitempty"` // "json" (default), "avro" or "debezium-json"
	TopicPartitions   int      `json:"topicPartitions,omitempty"`
	ReplicationFactor int      `json:"replicationFactor,omitempty"`
	// TLS, when not nil, encrypts the connections to the brokers; SASL
	// authenticates to them.
	TLS  *DatastreamTLS  `json:"tls,omitempty"`
	SASL *DatastreamSASL `json:"sasl,omitempty"`
	// Schemas, for debezium-json, sends the Kafka Connect schemas
	// (nil: true).
	Schemas *bool `json:"schemas,omitempty"`
}

// DatastreamTLS is the sink's TLS: the CA that signs the brokers'
// certificates (PEM; empty, the system's roots), an optional client
// certificate and key (PEM) for mutual TLS, and the name the brokers'
// certificates must carry (empty: the host dialed). The server answers
// with the key as "***"; sending "***" or nothing keeps the stored key.
type DatastreamTLS struct {
	CA         string `json:"ca,omitempty"`
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
	ServerName string `json:"serverName,omitempty"`
}

// DatastreamSASL is the sink's SASL authentication: Mechanism is
// "SCRAM-SHA-256", "SCRAM-SHA-512" or "PLAIN" (PLAIN only with TLS). The
// server answers with the password as "***"; sending "***" or nothing
// keeps the stored password while the username is the same.
type DatastreamSASL struct {
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password,omitempty"`
}

// AutoPause pauses a partition after Failures consecutive failures, for
// ResumeAfter (a duration such as "60s").
type AutoPause struct {
	Failures    int    `json:"failures,omitempty"`
	ResumeAfter string `json:"resumeAfter,omitempty"`
}

// Datastream is a datastream's definition, defaults filled, and state.
type Datastream struct {
	Name       string         `json:"name"`
	Database   string         `json:"database"`
	Tables     []string       `json:"tables,omitempty"`
	Partitions []int          `json:"partitions,omitempty"`
	Sink       DatastreamSink `json:"sink"`
	AutoPause  AutoPause      `json:"autoPause"`
	From       string         `json:"from"`
	// SnapshotRate bounds a snapshot's documents per second per partition.
	SnapshotRate int `json:"snapshotRate,omitempty"`
	// State is "running", "paused" or "partially-paused".
	State            string    `json:"state"`
	PausedPartitions []int     `json:"pausedPartitions"`
	Created          time.Time `json:"created"`
	Updated          time.Time `json:"updated"`
}

// DatastreamStatus is a datastream's state per partition.
type DatastreamStatus struct {
	Name       string                `json:"name"`
	Database   string                `json:"database"`
	State      string                `json:"state"`
	Partitions []DatastreamPartition `json:"partitions"`
}

// DatastreamPartition is one partition's task.
type DatastreamPartition struct {
	Partition int `json:"partition"`
	// State is "running", "paused", "auto-paused" or "unassigned".
	State      string `json:"state"`
	Owner      string `json:"owner"`
	Source     string `json:"source"`
	Checkpoint string `json:"checkpoint"`
	Latest     string `json:"latest"`
	Lag        struct {
		Transactions uint64   `json:"transactions"`
		Seconds      *float64 `json:"seconds"` // nil when unknown
	} `json:"lag"`
	Throughput      float64    `json:"throughput"`
	Delivered       uint64     `json:"delivered"`
	AutoPausedUntil *time.Time `json:"autoPausedUntil"`
	Failures        int        `json:"failures"`
	LastError       *struct {
		Message string    `json:"message"`
		At      time.Time `json:"at"`
	} `json:"lastError"`
	Detail string `json:"detail"`
	// Reported is when the owner published the live figures (lag,
	// throughput); nil when no owner reports the partition.
	Reported *time.Time `json:"reported"`
	// Snapshot is present while a "from":"snapshot" partition delivers
	// its snapshot: the view's SCN and the documents delivered.
	Snapshot *struct {
		SCN       string `json:"scn"`
		Documents uint64 `json:"documents"`
	} `json:"snapshot"`
}

func datastreamPath(parts ...string) string {
	p := "/_datastreams"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// PutDatastream creates the datastream name (created is true) or updates
// its definition. spec is a DatastreamSpec or the definition's JSON
// (json.RawMessage or []byte).
func (c *Client) PutDatastream(ctx context.Context, name string, spec any) (Datastream, bool, error) {
	r := newRequest(http.MethodPut, datastreamPath(name))
	if err := r.jsonBody(spec); err != nil {
		return Datastream{}, false, err
	}
	var d Datastream
	res, err := c.call(ctx, r, &d)
	if err != nil {
		return Datastream{}, false, err
	}
	return d, res.status == http.StatusCreated, nil
}

// GetDatastream reads a datastream.
func (c *Client) GetDatastream(ctx context.Context, name string) (Datastream, error) {
	var d Datastream
	_, err := c.call(ctx, newRequest(http.MethodGet, datastreamPath(name)), &d)
	return d, err
}

// ListDatastreams reads every datastream.
func (c *Client) ListDatastreams(ctx context.Context) ([]Datastream, error) {
	var out struct {
		Datastreams []Datastream `json:"datastreams"`
	}
	_, err := c.call(ctx, newRequest(http.MethodGet, datastreamPath()), &out)
	return out.Datastreams, err
}

// DeleteDatastream deletes a datastream and its checkpoints.
func (c *Client) DeleteDatastream(ctx context.Context, name string) error {
	_, err := c.do(ctx, newRequest(http.MethodDelete, datastreamPath(name)))
	return err
}

// PauseDatastream pauses the whole datastream, or the partitions given.
func (c *Client) PauseDatastream(ctx context.Context, name string, partitions ...int) (Datastream, error) {
	return c.pauseResume(ctx, name, "pause", partitions)
}

// ResumeDatastream resumes the whole datastream, or the partitions given
// (auto-paused ones too).
func (c *Client) ResumeDatastream(ctx context.Context, name string, partitions ...int) (Datastream, error) {
	return c.pauseResume(ctx, name, "resume", partitions)
}

func (c *Client) pauseResume(ctx context.Context, name, verb string, partitions []int) (Datastream, error) {
	r := newRequest(http.MethodPost, datastreamPath(name, verb))
	if len(partitions) > 0 {
		ps := make([]string, len(partitions))
		for i, p := range partitions {
			ps[i] = strconv.Itoa(p)
		}
		r.query["partitions"] = strings.Join(ps, ",")
	}
	var d Datastream
	_, err := c.call(ctx, r, &d)
	return d, err
}

// GetDatastreamStatus reads each partition's task state, lag and errors.
func (c *Client) GetDatastreamStatus(ctx context.Context, name string) (DatastreamStatus, error) {
	var s DatastreamStatus
	_, err := c.call(ctx, newRequest(http.MethodGet, datastreamPath(name, "status")), &s)
	return s, err
}
