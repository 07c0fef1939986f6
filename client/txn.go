package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// Txn is a transaction: operations on documents of one document group
// (sharing the partition key), across tables of one database, applied at
// one SCN or not at all.
type Txn struct {
	// PartitionKey, when set, is checked against every operation's key.
	PartitionKey any     `json:"partitionKey,omitempty"`
	Ops          []TxnOp `json:"ops"`
}

// UnmarshalJSON reads a transaction body as the REST API takes it (the
// TxnRequest of internal/api/openapi.yaml), keeping numbers exact, so a
// file can be read into a Txn and sent unchanged.
func (t *Txn) UnmarshalJSON(b []byte) error {
	type plain Txn
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*t = Txn(p)
	return nil
}

// TxnOp is one operation of a transaction or batch. Op is "put", "insert",
// "patch" or "delete". Key is the full key, or for "insert" on an
// auto-increment table the leading parts (the server assigns the last),
// or for "delete" leading parts to delete a collection.
type TxnOp struct {
	Op          string `json:"op"`
	Table       string `json:"table"`
	Key         Key    `json:"key"`
	Document    any    `json:"document,omitempty"`
	Patch       *Patch `json:"patch,omitempty"`
	IfMatch     string `json:"ifMatch,omitempty"`
	IfNoneMatch string `json:"ifNoneMatch,omitempty"`
	// IfUnmodifiedSince is an RFC 3339 time or an HTTP date.
	IfUnmodifiedSince string `json:"ifUnmodifiedSince,omitempty"`
}

// PutOp creates or replaces the document at key.
func PutOp(table string, key Key, doc any) TxnOp {
	return TxnOp{Op: "put", Table: table, Key: key, Document: doc}
}

// InsertOp inserts doc under leading with an auto-increment last key part.
func InsertOp(table string, leading Key, doc any) TxnOp {
	return TxnOp{Op: "insert", Table: table, Key: leading, Document: doc}
}

// PatchOp partially updates the document at key.
func PatchOp(table string, key Key, p Patch) TxnOp {
	return TxnOp{Op: "patch", Table: table, Key: key, Patch: &p}
}

// DeleteOp deletes the document at key (or the collection under leading
// key parts).
func DeleteOp(table string, key Key) TxnOp {
	return TxnOp{Op: "delete", Table: table, Key: key}
}

// TxnResult is the outcome of a committed transaction.
type TxnResult struct {
	SCN string `json:"scn"`
	// Results are in the order of the operations.
	Results []OpResult `json:"results"`
}

// OpResult is the outcome of one operation.
type OpResult struct {
	// Key is the full key written (with an assigned auto-increment part),
	// or the deleted key or collection prefix.
	Key  Key    `json:"key"`
	ETag string `json:"etag,omitempty"`
	// Created is true when the operation created the document.
	Created bool `json:"created,omitempty"`
	// Deleted counts the documents a delete removed.
	Deleted int `json:"deleted,omitempty"`
}

// Txn applies t atomically. A false condition is a 412 (IsPreconditionFailed)
// whose Operation names the operation; nothing is applied then. It is
// sent under an Idempotency-Key (IdempotencyKey, or one of the client's
// own), so its retries apply it once.
func (c *Client) Txn(ctx context.Context, db string, t Txn, opts ...WriteOption) (*TxnResult, error) {
	r := newRequest(http.MethodPost, "/"+url.PathEscape(db)+"/_txn")
	switch {
	case t.PartitionKey != nil:
		r.routed(db, Key{t.PartitionKey})
	case len(t.Ops) > 0:
		r.routed(db, t.Ops[0].Key)
	}
	if err := r.jsonBody(t); err != nil {
		return nil, err
	}
	applyIdempotent(r, opts)
	var out TxnResult
	if _, err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// applyIdempotent applies opts to r and gives it an Idempotency-Key.
func applyIdempotent(r *request, opts []WriteOption) {
	for _, o := range opts {
		o.applyWrite(r)
	}
	r.idempotent()
}

// BatchResult is the outcome of one operation of a batch: Result on
// success, else Problem.
type BatchResult struct {
	Status  int       `json:"status"`
	SCN     string    `json:"scn,omitempty"`
	Result  *OpResult `json:"result,omitempty"`
	Problem *Error    `json:"problem,omitempty"`
}

// Batch applies independent operations in order, each atomic on its own;
// one failing does not stop the others. The error is non-nil only when the
// batch as a whole was refused. It is sent under an Idempotency-Key
// (IdempotencyKey, or one of the client's own): the server remembers each
// operation's outcome, so a retry applies none twice.
func (c *Client) Batch(ctx context.Context, db string, ops []TxnOp, opts ...WriteOption) ([]BatchResult, error) {
	r := newRequest(http.MethodPost, "/"+url.PathEscape(db)+"/_batch")
	if err := r.jsonBody(map[string]any{"ops": ops}); err != nil {
		return nil, err
	}
	applyIdempotent(r, opts)
	var out struct {
		Results []BatchResult `json:"results"`
	}
	if _, err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}
