package bulkload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/problem"
)

// maxManifestBytes bounds a manifest read: a few hundred bytes a
// partition.
const maxManifestBytes = 16 << 20

// source is where a build's files are: a directory every node can read,
// or an http(s) base URL.
type source struct {
	dir  string   // a local directory, or
	base *url.URL // an http(s) URL of the directory
	hc   *http.Client
}

// parseSource reads the user's spelling of a build's location.
func parseSource(s string, hc *http.Client) (source, error) {
	bad := func(format string, args ...any) error {
		return problem.Field(problem.Malformed, "source", format, args...)
	}
	switch {
	case s == "":
		return source{}, bad("source is required: a directory, file:///dir or http(s)://host/dir")
	case strings.HasPrefix(s, "/"):
		return source{dir: filepath.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return source{}, bad("source %q is not a path or URL: %v", s, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return source{}, bad("source %q: a file URL names an absolute local path (file:///dir)", s)
		}
		return source{dir: filepath.Clean(u.Path)}, nil
	case "http", "https":
		if u.Host == "" {
			return source{}, bad("source %q has no host", s)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		u.RawQuery, u.Fragment = "", ""
		return source{base: u, hc: hc}, nil
	}
	return source{}, bad("source %q: give an absolute directory, file:///dir or an http(s) URL", s)
}

func (s source) String() string {
	if s.base != nil {
		return s.base.String()
	}
	return s.dir
}

func (s source) url(name string) string { return s.base.JoinPath(name).String() }

// manifest reads the build's manifest.json.
func (s source) manifest(ctx context.Context) ([]byte, error) {
	if s.base == nil {
		f, err := os.Open(filepath.Join(s.dir, bulk.ManifestName))
		if err != nil {
			return nil, fmt.Errorf("read the build's manifest: %w", err)
		}
		defer f.Close()
		return readAtMost(f, maxManifestBytes)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(bulk.ManifestName), nil)
	if err != nil {
		return nil, err
	}
	res, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the build's manifest: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the build's manifest: GET %s answered %s", s.url(bulk.ManifestName), res.Status)
	}
	return readAtMost(res.Body, maxManifestBytes)
}

func readAtMost(r io.Reader, n int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, n+1))
	if err == nil && int64(len(b)) > n {
		err = fmt.Errorf("the manifest is larger than %d bytes", n)
	}
	return b, err
}

// fetch makes partition file f readable here and returns its path: in
// a directory source, the file itself; over http, a copy in staging,
// continued with a Range request when an earlier fetch left part of it.
// It does not verify the file.
func (s source) fetch(ctx context.Context, f bulk.File, staging string) (string, error) {
	if s.base == nil {
		return filepath.Join(s.dir, f.Path), nil
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(staging, f.Path)
	out, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer out.Close()
	have, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	if have >= f.Bytes {
		// Complete, or longer than the manifest says: verification decides.
		return path, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url(f.Path), nil)
	if err != nil {
		return "", err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	res, err := s.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch %s: %w", s.url(f.Path), err)
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		// The server ignored the range: start over.
		if err := out.Truncate(0); err != nil {
			return "", err
		}
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("fetch %s: %s", s.url(f.Path), res.Status)
	}
	if _, err := io.Copy(out, res.Body); err != nil {
		return "", fmt.Errorf("fetch %s: %w", s.url(f.Path), err)
	}
	return path, out.Sync()
}

// verify checks the file at path against the manifest's size and
// SHA-256; a mismatch wraps bulk.ErrChecksum.
func verify(path string, f bulk.File) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	return bulk.VerifyReader(fh, f)
}

// refused reports whether err means the file is not the manifest's: the
// load fails rather than retrying.
func refused(err error) bool { return errors.Is(err, bulk.ErrChecksum) }
