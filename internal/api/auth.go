package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/audit"
	"github.com/doppio-db/doppio/internal/auth"
	"github.com/doppio-db/doppio/internal/problem"
)

// AttachAuth gives the server the node's authenticator: it serves login
// and the users API, and, when Config.Authenticate is set, authenticates
// and authorizes every request by it.
func (s *Server) AttachAuth(a *auth.Authenticator) { s.auth.Store(a) }

// AttachAudit gives the server the audit log the routes that change
// security-relevant state, and logins, are recorded in.
func (s *Server) AttachAudit(l *audit.Log) { s.auditLog.Store(l) }

func (s *Server) authenticator() (*auth.Authenticator, error) {
	a := s.auth.Load()
	if a == nil {
		return nil, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: "users are not available on this node yet"}
	}
	return a, nil
}

// authorize authenticates r and checks its caller holds rt's privilege,
// before anything runs, so a refused request changes nothing. The
// returned request carries the caller (auth.WithCaller) when one was
// established, refused or not. A caller already in r's context was
// established by the listener (a peer's forward) and is only authorized.
// Without Config.Authenticate every request is admitted and carries no
// caller: insecure mode, where anyone may do anything.
func (s *Server) authorize(rt *route, r *http.Request, p params) (*http.Request, error) {
	if !s.cfg.Authenticate || rt.priv == auth.Public {
		return r, nil
	}
	a, err := s.authenticator()
	if err != nil {
		return r, err
	}
	c, had := auth.CallerFrom(r.Context())
	if !had {
		if c, err = a.Authenticate(r); err != nil {
			return r, err
		}
		r = r.WithContext(auth.WithCaller(r.Context(), c))
	}
	return r, a.Authorize(c, rt.priv, p.db)
}

// mayRead reports whether r's caller may read database db.
func (s *Server) mayRead(r *http.Request, db string) bool {
	if !s.cfg.Authenticate {
		return true
	}
	a := s.auth.Load()
	c, _ := auth.CallerFrom(r.Context())
	if a == nil {
		return c.Node
	}
	grants, _ := a.Users().Grants(c.User)
	return auth.Allows(c, grants, auth.Read, db)
}

// needsRoot refuses a change only root may make unless r's caller holds
// root: a change to the user root or to any user holding root, and a
// grant or revocation of the root role. userAdmin manages users but
// cannot make itself, or anyone, root, nor take over a root's password.
func (s *Server) needsRoot(r *http.Request, user string, role auth.Role) error {
	if !s.cfg.Authenticate {
		return nil
	}
	a, err := s.authenticator()
	if err != nil {
		return err
	}
	target, _ := a.Users().Grants(user)
	if user != auth.RootUser && role != auth.RoleRoot && !hasRoot(target) {
		return nil
	}
	c, _ := auth.CallerFrom(r.Context())
	mine, _ := a.Users().Grants(c.User)
	if c.Node || (c.User != "" && hasRoot(mine)) {
		return nil
	}
	return problem.New(problem.Forbidden, "only root may change a user holding root, or grant or revoke the root role")
}

func hasRoot(gs []auth.Grant) bool {
	return slices.Contains(gs, auth.Grant{Role: auth.RoleRoot})
}

// auditRequest records a request of an audited route: who (when
// authenticated), what, from where, and its outcome.
func (s *Server) auditRequest(rt *route, r *http.Request, status int, err error) {
	l := s.auditLog.Load()
	if l == nil {
		return
	}
	c, _ := auth.CallerFrom(r.Context())
	e := audit.Event{User: c.User, Node: c.Node, From: auth.ClientAddr(r), Action: rt.audit,
		Target: r.Method + " " + r.URL.EscapedPath(), Outcome: outcome(status), Status: status}
	if err != nil {
		e.Detail = err.Error()
	}
	if werr := l.Record(e); werr != nil {
		s.log.Error("audit log write failed", "err", werr, "action", rt.audit)
	}
}

func outcome(status int) string {
	switch {
	case status < 400:
		return audit.Success
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusTooManyRequests:
		return audit.Denied
	}
	return audit.Failure
}

type loginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

type loginAnswer struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// maxAuthBytes bounds a login or user request body.
const maxAuthBytes = 16 << 10

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ params) (err error) {
	var req loginRequest
	defer func() {
		status := http.StatusOK
		if pe, ok := problem.As(err); ok {
			status = pe.Kind.Status()
		} else if err != nil {
			status = http.StatusInternalServerError
		}
		e := audit.Event{User: req.User, From: auth.ClientAddr(r), Action: "login", Outcome: outcome(status), Status: status}
		if err != nil {
			e.Detail = err.Error()
		}
		if werr := s.auditLog.Load().Record(e); werr != nil {
			s.log.Error("audit log write failed", "err", werr, "action", "login")
		}
	}()
	a, err := s.authenticator()
	if err != nil {
		return err
	}
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	if err := decodeStrict(r, maxAuthBytes, &req); err != nil {
		return err
	}
	if req.User == "" {
		return problem.Field(problem.Malformed, "user", "give the user to log in as")
	}
	if req.Password == "" {
		return problem.Field(problem.Malformed, "password", "give the user's password")
	}
	tok, exp, err := a.Login(r.Context(), req.User, req.Password, auth.ClientAddr(r))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, loginAnswer{Token: tok, Expires: exp.UTC()})
}

// users is the store the users API works on, once r has no query
// parameter (none of its routes takes one).
func (s *Server) users(r *http.Request) (*auth.Store, error) {
	a, err := s.authenticator()
	if err != nil {
		return nil, err
	}
	return a.Users(), onlyParams(r.URL.Query())
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, _ params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"users": users.List()})
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, p params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	u, err := users.Get(p.name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}

type putUserRequest struct {
	// Password, when given, becomes the user's password.
	Password *string `json:"password"`
}

func (s *Server) putUser(w http.ResponseWriter, r *http.Request, p params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	if err := auth.ValidName(p.name); err != nil {
		return err
	}
	var req putUserRequest
	if r.ContentLength != 0 {
		if err := decodeStrict(r, maxAuthBytes, &req); err != nil {
			return err
		}
	}
	if err := s.needsRoot(r, p.name, ""); err != nil {
		return err
	}
	created, err := users.Put(r.Context(), p.name, req.Password)
	if err != nil {
		return err
	}
	return writeUser(w, users, p.name, created, "/_users/"+p.name)
}

// writeUser answers with the user name as it is now: 201 (with
// location, when given) when the request created what it asked for, else
// 200.
func writeUser(w http.ResponseWriter, users *auth.Store, name string, created bool, location string) error {
	u, err := users.Get(name)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		if location != "" {
			w.Header().Set("Location", location)
		}
	}
	return writeJSON(w, status, u)
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, p params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	if err := s.needsRoot(r, p.name, ""); err != nil {
		return err
	}
	if err := users.Delete(r.Context(), p.name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) addGrant(w http.ResponseWriter, r *http.Request, p params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	var g auth.Grant
	if err := decodeStrict(r, maxAuthBytes, &g); err != nil {
		return err
	}
	if err := s.needsRoot(r, p.name, g.Role); err != nil {
		return err
	}
	added, err := users.AddGrant(r.Context(), p.name, g)
	if err != nil {
		return err
	}
	return writeUser(w, users, p.name, added, "")
}

func (s *Server) removeGrant(w http.ResponseWriter, r *http.Request, p params) error {
	users, err := s.users(r)
	if err != nil {
		return err
	}
	g := auth.Grant{Role: auth.Role(p.role), DB: p.db}
	if err := s.needsRoot(r, p.name, g.Role); err != nil {
		return err
	}
	if err := users.RemoveGrant(r.Context(), p.name, g); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
