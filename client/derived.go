package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/doppio-db/doppio/client/wire"
)

// KindDerived is TableSpec.Kind for a read-only table served in versions
// pushed from offline builds.
const KindDerived = "derived"

// DerivedPush asks for the next version of a derived table: its build's
// Source, an optional Throttle in bytes per second per node, NoSwap to
// stage without swapping, and Retain to change how many versions are kept.
type DerivedPush = wire.DerivedPush

// DerivedTable is a derived table's versions; DerivedVersion one of them,
// DerivedPartition one partition's progress in fetching or deleting one.
type (
	DerivedTable     = wire.DerivedTable
	DerivedVersion   = wire.DerivedVersion
	DerivedPartition = wire.DerivedPartition
)

// Version states (DerivedVersion.State).
const (
	VersionFetching = wire.VersionFetching
	VersionStaged   = wire.VersionStaged
	VersionCurrent  = wire.VersionCurrent
	VersionBackup   = wire.VersionBackup
	VersionFailed   = wire.VersionFailed
	VersionDeleting = wire.VersionDeleting
)

// ReadVersion makes a read of a derived table answer from version n (a
// staged, current or backup one) rather than the current one.
func ReadVersion(n int) ReadOption {
	return readFunc(func(r *request) { r.header.Set("X-Doppio-Version", strconv.Itoa(n)) })
}

func derivedPath(db, table string) string {
	return "/_derived/" + url.PathEscape(db) + "/" + url.PathEscape(table)
}

// PushVersion starts the next version of derived table db.table from a
// build. A build that does not fit the table, or a push while another
// version is fetching or staged, is an *Error (409 names the other).
func (c *Client) PushVersion(ctx context.Context, db, table string, req DerivedPush) (DerivedTable, error) {
	r := newRequest(http.MethodPost, derivedPath(db, table)+"/versions")
	if err := r.jsonBody(req); err != nil {
		return DerivedTable{}, err
	}
	var t DerivedTable
	_, err := c.call(ctx, r, &t)
	return t, err
}

// DerivedStatus reads a derived table's versions with their progress.
func (c *Client) DerivedStatus(ctx context.Context, db, table string) (DerivedTable, error) {
	var t DerivedTable
	_, err := c.call(ctx, newRequest(http.MethodGet, derivedPath(db, table)), &t)
	return t, err
}

// SwapVersion makes the staged version current.
func (c *Client) SwapVersion(ctx context.Context, db, table string) (DerivedTable, error) {
	return c.moveVersion(ctx, db, table, "swap")
}

// RollbackVersion makes the previous version current again.
func (c *Client) RollbackVersion(ctx context.Context, db, table string) (DerivedTable, error) {
	return c.moveVersion(ctx, db, table, "rollback")
}

// RollForwardVersion undoes a rollback.
func (c *Client) RollForwardVersion(ctx context.Context, db, table string) (DerivedTable, error) {
	return c.moveVersion(ctx, db, table, "roll-forward")
}

// DiscardVersion deletes a staged version (pushed with NoSwap) from
// every replica without making it current: version n, or the staged one
// when n is 0. Any other version is refused with an *Error (409).
func (c *Client) DiscardVersion(ctx context.Context, db, table string, n int) (DerivedTable, error) {
	r := newRequest(http.MethodPost, derivedPath(db, table)+"/discard")
	if n != 0 {
		r.query["version"] = strconv.Itoa(n)
	}
	var t DerivedTable
	_, err := c.call(ctx, r, &t)
	return t, err
}

func (c *Client) moveVersion(ctx context.Context, db, table, verb string) (DerivedTable, error) {
	var t DerivedTable
	_, err := c.call(ctx, newRequest(http.MethodPost, derivedPath(db, table)+"/"+verb), &t)
	return t, err
}
