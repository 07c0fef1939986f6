package bulk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// VerifyFile checks the file want describes, inside build directory dir,
// against want's size and SHA-256. A size mismatch is reported before any
// byte is hashed.
func VerifyFile(dir string, want File) error {
	f, err := os.Open(filepath.Join(dir, want.Path))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != want.Bytes {
		return fmt.Errorf("%w: %s is %d bytes, the manifest says %d", ErrChecksum, want.Path, st.Size(), want.Bytes)
	}
	return VerifyReader(f, want)
}

// VerifyReader reads r to its end and checks its size and SHA-256 against
// want's.
func VerifyReader(r io.Reader, want File) error {
	sum := sha256.New()
	n, err := io.Copy(sum, r)
	if err != nil {
		return fmt.Errorf("bulk: reading %s: %w", want.Path, err)
	}
	if n != want.Bytes {
		return fmt.Errorf("%w: %s is %d bytes, the manifest says %d", ErrChecksum, want.Path, n, want.Bytes)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("%w: %s has sha256 %s, the manifest says %s", ErrChecksum, want.Path, got, want.SHA256)
	}
	return nil
}

// ErrChecksum is wrapped by every size or checksum mismatch VerifyReader
// and VerifyFile report.
var ErrChecksum = errors.New("partition file does not match the manifest")

// ReadFile checks the file want describes, inside dir, against want's
// size and SHA-256, then calls fn with each record in order and checks
// the record count and key range the manifest claims.
func ReadFile(dir string, want File, fn func(Record) error) error {
	if err := VerifyFile(dir, want); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, want.Path))
	if err != nil {
		return err
	}
	defer f.Close()
	r := NewReader(f)
	var first []byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", want.Path, err)
		}
		if first == nil {
			first = rec.Key
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	pos := r.Position()
	switch {
	case pos.Records != want.Records:
		return fmt.Errorf("%w: %s holds %d records, the manifest says %d", ErrInvalidManifest, want.Path, pos.Records, want.Records)
	case !bytes.Equal(first, want.FirstKey) || !bytes.Equal(pos.LastKey, want.LastKey):
		return fmt.Errorf("%w: %s spans keys %x..%x, the manifest says %x..%x", ErrInvalidManifest, want.Path, first, pos.LastKey, want.FirstKey, want.LastKey)
	}
	return nil
}
