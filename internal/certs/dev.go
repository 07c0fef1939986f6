package certs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// DevHosts are the names a local (`doppio dev --secure`) node certificate
// holds: every way a client on the machine reaches a loopback listener.
var DevHosts = []string{"localhost", "127.0.0.1", "::1"}

// DevUser is the user whose client certificate a local secure cluster
// starts with.
const DevUser = "root"

// EnsureDev makes dir a local cluster's certs directory: a CA, a node
// certificate for DevHosts and DevUser's client certificate, each created
// only when its certificate file is missing, so a restart keeps what the
// first start made. It reports whether it created anything.
func EnsureDev(dir string) (bool, error) {
	created := false
	steps := []struct {
		file string
		make func() error
	}{
		{CAFile, func() error { return CreateCA(dir, Options{}) }},
		{NodeCertFile, func() error { return CreateNode(dir, DevHosts, Options{}) }},
		{ClientCertFile(DevUser), func() error { return CreateClient(dir, DevUser, Options{}) }},
	}
	for _, s := range steps {
		_, err := os.Stat(filepath.Join(dir, s.file))
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return created, err
		}
		if err := s.make(); err != nil {
			return created, err
		}
		created = true
	}
	return created, nil
}
