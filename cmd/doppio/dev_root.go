package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/certs"
)

// rootPasswordFile, under a secure dev cluster's data directory, holds the
// password `doppio dev --secure` gave root on its first start.
const rootPasswordFile = "root.password"

// devRootPassword is root's password for the secure dev cluster under
// data: the one an earlier start saved, or (isNew) a new random one that
// must be set and then saved with saveRootPassword.
func devRootPassword(data string) (pw string, isNew bool, err error) {
	b, err := os.ReadFile(filepath.Join(data, rootPasswordFile))
	if err == nil {
		return strings.TrimSpace(string(b)), false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	return base64.RawURLEncoding.EncodeToString(raw), true, nil
}

// saveRootPassword writes root's password, readable by its owner only,
// once it is set: a start that fails before then draws a new one next
// time, and root's client certificate can always set another.
func saveRootPassword(data, pw string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, rootPasswordFile), []byte(pw+"\n"), 0o600)
}

// setDevRootPassword gives root a password on the secure dev cluster at
// url, through the REST API as root (by its client certificate in dir),
// the first time; later starts keep the saved one.
func setDevRootPassword(ctx context.Context, url, dir, data string) error {
	pw, isNew, err := devRootPassword(data)
	if err != nil || !isNew {
		return err
	}
	tlsConf, err := certs.ClientTLS(dir, certs.DevUser)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := client.New(url, client.WithTLS(tlsConf), client.WithRetry(time.Minute))
	if _, _, err := c.PutUser(ctx, certs.DevUser, pw); err != nil {
		return fmt.Errorf("setting root's password: %w", err)
	}
	return saveRootPassword(data, pw)
}
