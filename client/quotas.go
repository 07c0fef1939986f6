package client

import (
	"context"
	"net/http"
	"net/url"
)

// QuotaScope says whose quota it is: a database's or a user's.
type QuotaScope string

// The scopes of quotas.
const (
	DatabaseQuota QuotaScope = "databases"
	UserQuota     QuotaScope = "users"
)

// Quota is a database's or a user's capacity, cluster-wide, in units per
// second; 0 is unlimited. A read unit is up to 4 KiB read, a write unit up
// to 1 KiB written (the document, its change-log image and its index
// entries).
type Quota struct {
	// Name is the database or user (answers only).
	Name                string `json:"name,omitempty"`
	ReadUnitsPerSecond  int64  `json:"readUnitsPerSecond"`
	WriteUnitsPerSecond int64  `json:"writeUnitsPerSecond"`
}

// Quotas lists every quota set.
type Quotas struct {
	Databases []Quota `json:"databases"`
	Users     []Quota `json:"users"`
}

func quotaPath(scope QuotaScope, name string) string {
	return "/_quotas/" + string(scope) + "/" + url.PathEscape(name)
}

// GetQuota reads the quota of the database or user name; a 404 error
// (IsNotFound) when none is set.
func (c *Client) GetQuota(ctx context.Context, scope QuotaScope, name string) (Quota, error) {
	var q Quota
	_, err := c.call(ctx, newRequest(http.MethodGet, quotaPath(scope, name)), &q)
	return q, err
}

// SetQuota sets the quota of the database or user name; created reports
// that none was set before.
func (c *Client) SetQuota(ctx context.Context, scope QuotaScope, name string, q Quota) (Quota, bool, error) {
	r := newRequest(http.MethodPut, quotaPath(scope, name))
	q.Name = "" // the path names it
	if err := r.jsonBody(q); err != nil {
		return Quota{}, false, err
	}
	var out Quota
	res, err := c.call(ctx, r, &out)
	if err != nil {
		return Quota{}, false, err
	}
	return out, res.status == http.StatusCreated, nil
}

// DeleteQuota removes the quota of the database or user name: unlimited
// again. A 404 error when none was set.
func (c *Client) DeleteQuota(ctx context.Context, scope QuotaScope, name string) error {
	_, err := c.do(ctx, newRequest(http.MethodDelete, quotaPath(scope, name)))
	return err
}

// ListQuotas reads every quota set.
func (c *Client) ListQuotas(ctx context.Context) (Quotas, error) {
	var out Quotas
	_, err := c.call(ctx, newRequest(http.MethodGet, "/_quotas"), &out)
	return out, err
}
