package client

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"time"
)

// WithToken authenticates every request with a session token from Login
// (Authorization: Bearer).
func WithToken(token string) Option {
	return func(c *Client) { c.authorization = "Bearer " + token }
}

// WithBasicAuth authenticates every request with a user name and password
// (Authorization: Basic). The server verifies a password once and then
// remembers it, so this costs no more per request than a token.
func WithBasicAuth(user, password string) Option {
	return func(c *Client) {
		c.authorization = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
}

// Authorization is the Authorization header value the client sends ("":
// none), for requests made outside it (e.g. with client/changes).
func (c *Client) Authorization() string { return c.authorization }

func (c *Client) authorize(req *http.Request) {
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
}

// IsUnauthenticated reports whether err is a 401: no credentials, or
// credentials that prove nobody (wrong, expired, revoked).
func IsUnauthenticated(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsForbidden reports whether err is a 403: the user lacks the privilege.
func IsForbidden(err error) bool { return hasStatus(err, http.StatusForbidden) }

// Session is a session token and when it expires.
type Session struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// Login exchanges user's password for a session token (see WithToken).
func (c *Client) Login(ctx context.Context, user, password string) (Session, error) {
	r := newRequest(http.MethodPost, "/_auth/login")
	if err := r.jsonBody(map[string]string{"user": user, "password": password}); err != nil {
		return Session{}, err
	}
	var s Session
	_, err := c.call(ctx, r, &s)
	return s, err
}

// Grant is a role held by a user: read, readWrite or dbAdmin on DB, or
// the cluster-wide clusterAdmin, userAdmin or root (DB empty).
type Grant struct {
	Role string `json:"role"`
	DB   string `json:"db,omitempty"`
}

// User is a user and its grants.
type User struct {
	Name string `json:"name"`
	// HasPassword: false for a user that authenticates by client
	// certificate only.
	HasPassword bool      `json:"hasPassword"`
	Grants      []Grant   `json:"grants"`
	Created     time.Time `json:"created"`
}

func userPath(parts ...string) string {
	p := "/_users"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// PutUser creates the user name if absent (created is true) and sets its
// password when password is not empty; an empty one leaves it as it is
// (a new user without a password authenticates by certificate only).
func (c *Client) PutUser(ctx context.Context, name, password string) (u User, created bool, err error) {
	r := newRequest(http.MethodPut, userPath(name))
	body := map[string]string{}
	if password != "" {
		body["password"] = password
	}
	if err := r.jsonBody(body); err != nil {
		return User{}, false, err
	}
	res, err := c.call(ctx, r, &u)
	if err != nil {
		return User{}, false, err
	}
	return u, res.status == http.StatusCreated, nil
}

// GetUser reads a user.
func (c *Client) GetUser(ctx context.Context, name string) (User, error) {
	var u User
	_, err := c.call(ctx, newRequest(http.MethodGet, userPath(name)), &u)
	return u, err
}

// ListUsers reads every user.
func (c *Client) ListUsers(ctx context.Context) ([]User, error) {
	var out struct {
		Users []User `json:"users"`
	}
	_, err := c.call(ctx, newRequest(http.MethodGet, userPath()), &out)
	return out.Users, err
}

// DeleteUser deletes a user; its tokens are refused from then on.
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	_, err := c.do(ctx, newRequest(http.MethodDelete, userPath(name)))
	return err
}

// GrantRole grants g to the user name; added is false when it was held.
func (c *Client) GrantRole(ctx context.Context, name string, g Grant) (u User, added bool, err error) {
	r := newRequest(http.MethodPost, userPath(name, "grants"))
	if err := r.jsonBody(g); err != nil {
		return User{}, false, err
	}
	res, err := c.call(ctx, r, &u)
	if err != nil {
		return User{}, false, err
	}
	return u, res.status == http.StatusCreated, nil
}

// RevokeRole revokes g from the user name.
func (c *Client) RevokeRole(ctx context.Context, name string, g Grant) error {
	parts := []string{name, "grants", g.Role}
	if g.DB != "" {
		parts = append(parts, g.DB)
	}
	_, err := c.do(ctx, newRequest(http.MethodDelete, userPath(parts...)))
	return err
}
