package bulk

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/keys"
)

func testRecords(t *testing.T, n int) []Record {
	t.Helper()
	recs := make([]Record, n)
	for i := range recs {
		k, err := keys.EncodeTuple(keys.Tuple{"user", int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = Record{Key: k, Doc: bytes.Repeat([]byte{byte(i)}, i%300)}
	}
	return recs
}

func writeFile(t *testing.T, recs []Record) ([]byte, File) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.File(3, FileName(3))
}

func readAll(r *Reader) ([]Record, error) {
	var out []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

func equalRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d records, wrote %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Doc, want[i].Doc) {
			t.Fatalf("record %d: read %x/%x, wrote %x/%x", i, got[i].Key, got[i].Doc, want[i].Key, want[i].Doc)
		}
	}
}

func TestPartitionFileRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			recs := testRecords(t, n)
			b, f := writeFile(t, recs)
			if f.Records != int64(n) || f.Bytes != int64(len(b)) || f.Partition != 3 || f.Path != "p-00003.dpb" {
				t.Fatalf("file %+v for %d records in %d bytes", f, n, len(b))
			}
			if n > 0 && (!bytes.Equal(f.FirstKey, recs[0].Key) || !bytes.Equal(f.LastKey, recs[n-1].Key)) {
				t.Fatalf("key range %x..%x", f.FirstKey, f.LastKey)
			}
			if n == 0 && (f.FirstKey != nil || f.LastKey != nil) {
				t.Fatalf("empty file has key range %x..%x", f.FirstKey, f.LastKey)
			}
			if err := VerifyReader(bytes.NewReader(b), f); err != nil {
				t.Fatal(err)
			}
			got, err := readAll(NewReader(bytes.NewReader(b)))
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, recs)
		})
	}
}

func TestEmptyPartitionFileIsMagicAndTrailer(t *testing.T) {
	b, _ := writeFile(t, nil)
	if want := magic + "\x00\x00"; string(b) != want {
		t.Fatalf("empty file %q, want %q", b, want)
	}
}

// TestReaderResumesAtEveryBoundary reopens the file at every Position a
// Reader reported and checks the rest reads exactly as from the start.
func TestReaderResumesAtEveryBoundary(t *testing.T) {
	recs := testRecords(t, 50)
	b, _ := writeFile(t, recs)
	r := NewReader(bytes.NewReader(b))
	positions := []Position{}
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, r.Position())
	}
	for i, pos := range positions {
		if pos.Records != int64(i+1) || !bytes.Equal(pos.LastKey, recs[i].Key) {
			t.Fatalf("position %d is %+v", i, pos)
		}
		rr, err := NewReaderAt(bytes.NewReader(b[pos.Offset:]), pos)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(rr)
		if err != nil {
			t.Fatalf("resuming at %+v: %v", pos, err)
		}
		equalRecords(t, got, recs[i+1:])
	}
	// The zero Position reads from the start.
	rr, err := NewReaderAt(bytes.NewReader(b), Position{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(rr)
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)
}

func TestReaderAtRefusesANonBoundary(t *testing.T) {
	for _, pos := range []Position{
		{Offset: 3, Records: 1, LastKey: []byte{1}},
		{Offset: 20, Records: 0, LastKey: []byte{1}},
		{Offset: 20, Records: 2},
		{Offset: 20, Records: -1, LastKey: []byte{1}},
	} {
		if _, err := NewReaderAt(bytes.NewReader(nil), pos); err == nil {
			t.Errorf("NewReaderAt(%+v) accepted a position that is no record boundary", pos)
		}
	}
}

// TestResumedReaderStillChecksOrderAndCount resumes with a LastKey that
// sorts after the file's next key, and with a wrong record count.
func TestResumedReaderStillChecksOrderAndCount(t *testing.T) {
	recs := testRecords(t, 3)
	b, _ := writeFile(t, recs)
	r := NewReader(bytes.NewReader(b))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	pos := r.Position()

	bad := pos
	bad.LastKey = recs[2].Key
	rr, _ := NewReaderAt(bytes.NewReader(b[pos.Offset:]), bad)
	if _, err := readAll(rr); !strings.Contains(fmt.Sprint(err), "sorts before the previous key") {
		t.Fatalf("resumed with a later LastKey: %v", err)
	}

	bad = pos
	bad.Records = 5
	rr, _ = NewReaderAt(bytes.NewReader(b[pos.Offset:]), bad)
	if _, err := readAll(rr); !strings.Contains(fmt.Sprint(err), "trailer counts 3 records, the file holds 7") {
		t.Fatalf("resumed with a wrong count: %v", err)
	}
}

// rawFile assembles a file from raw records and a trailer so tests can
// build what no Writer would.
func rawFile(recs []Record, count uint64) []byte {
	b := []byte(magic)
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r.Key)))
		b = append(b, r.Key...)
		b = binary.AppendUvarint(b, uint64(len(r.Doc)))
		b = append(b, r.Doc...)
	}
	b = append(b, 0)
	return binary.AppendUvarint(b, count)
}

func TestReaderReportsEveryCorruption(t *testing.T) {
	recs := testRecords(t, 3)
	good, _ := writeFile(t, recs)
	rec0 := int64(len(magic))
	size := func(r Record) int64 { return 1 + int64(len(r.Key)) + 1 + int64(len(r.Doc)) }
	rec1 := rec0 + size(recs[0])
	for _, tc := range []struct {
		name   string
		file   []byte
		offset int64
		record int64
		reason string
	}{
		{"empty", nil, 0, 1, `truncated: 0 bytes, shorter than the magic "DOPPIOB1"`},
		{"short magic", []byte("DOPP"), 0, 1, `truncated: 4 bytes, shorter than the magic "DOPPIOB1"`},
		{"wrong magic", append([]byte("DOPPIOB2"), good[8:]...), 0, 1, `magic "DOPPIOB2", want "DOPPIOB1"`},
		{"no end marker", []byte(magic), rec0, 1, "truncated: the file ends inside the key length"},
		{"cut inside a key", good[:rec0+3], rec0 + 3, 1, fmt.Sprintf("truncated: the file ends 2 bytes into a %d-byte key", len(recs[0].Key))},
		{"cut before the document length", good[:rec1-1-int64(len(recs[0].Doc))], rec1 - 1 - int64(len(recs[0].Doc)), 1, "truncated: the file ends inside the document length"},
		{"no trailer count", good[:len(good)-1], int64(len(good) - 1), 4, "truncated: the file ends inside the trailer record count"},
		{"repeated key", rawFile([]Record{recs[0], recs[1], recs[1]}, 3), rec1 + size(recs[1]), 3, fmt.Sprintf("key %x repeats the previous record's key", recs[1].Key)},
		{"disorder", rawFile([]Record{recs[1], recs[0]}, 2), rec0 + size(recs[1]), 2, fmt.Sprintf("key %x sorts before the previous key %x", recs[0].Key, recs[1].Key)},
		{"trailer count too high", rawFile(recs, 4), int64(len(good) - 1), 4, "trailer counts 4 records, the file holds 3"},
		{"trailer count too low", rawFile(recs, 2), int64(len(good) - 1), 4, "trailer counts 2 records, the file holds 3"},
		{"trailing garbage", append(bytes.Clone(good), 'x'), int64(len(good)), 4, "trailing garbage after the trailer"},
		{"non-minimal end marker", append([]byte(magic), 0x80, 0x00, 0x00), rec0, 1, "key length is not minimally encoded"},
		{"key length overflow", append([]byte(magic), bytes.Repeat([]byte{0xff}, 10)...), rec0, 1, "key length overflows 64 bits"},
		{"huge key length", binary.AppendUvarint([]byte(magic), MaxKeyBytes+1), rec0, 1, fmt.Sprintf("key length %d exceeds %d", MaxKeyBytes+1, MaxKeyBytes)},
		{"huge document length", binary.AppendUvarint(append(binary.AppendUvarint([]byte(magic), 1), 7), MaxDocBytes+1), rec0 + 2, 1, fmt.Sprintf("document length %d exceeds %d", MaxDocBytes+1, MaxDocBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(NewReader(bytes.NewReader(tc.file)))
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want a CorruptError", err)
			}
			if ce.Offset != tc.offset || ce.Record != tc.record || ce.Reason != tc.reason {
				t.Fatalf("got offset %d record %d %q, want offset %d record %d %q", ce.Offset, ce.Record, ce.Reason, tc.offset, tc.record, tc.reason)
			}
			// The error is final.
			if _, again := NewReader(bytes.NewReader(tc.file)).Next(); again == nil && tc.record == 1 {
				t.Fatal("first Next of a file corrupt in its first record succeeded")
			}
		})
	}
}

// TestEveryTruncationIsReported cuts a valid file at every length and
// checks the Reader never reports a clean end.
func TestEveryTruncationIsReported(t *testing.T) {
	good, _ := writeFile(t, testRecords(t, 5))
	for n := 0; n < len(good); n++ {
		_, err := readAll(NewReader(bytes.NewReader(good[:n])))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("file cut to %d of %d bytes: %v", n, len(good), err)
		}
	}
}

func TestWriterRefusesBadRecords(t *testing.T) {
	recs := testRecords(t, 2)
	for _, tc := range []struct {
		name string
		recs []Record
		want string
	}{
		{"empty key", []Record{{Key: nil, Doc: []byte{1}}}, "empty record key"},
		{"repeated key", []Record{recs[0], recs[0]}, "does not sort after the previous key"},
		{"disorder", []Record{recs[1], recs[0]}, "does not sort after the previous key"},
		{"huge key", []Record{{Key: make([]byte, MaxKeyBytes+1)}}, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(io.Discard)
			var err error
			for _, r := range tc.recs {
				if err = w.Write(r); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	w := NewWriter(io.Discard)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(recs[0]); err == nil {
		t.Fatal("write after Close succeeded")
	}
}

func TestVerifyFile(t *testing.T) {
	dir := t.TempDir()
	b, f := writeFile(t, testRecords(t, 10))
	if err := os.WriteFile(filepath.Join(dir, f.Path), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyFile(dir, f); err != nil {
		t.Fatal(err)
	}
	long := f
	long.Bytes++
	if err := VerifyFile(dir, long); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), fmt.Sprintf("p-00003.dpb is %d bytes, the manifest says %d", f.Bytes, f.Bytes+1)) {
		t.Fatalf("size mismatch: %v", err)
	}
	// Same size, one byte flipped.
	b[len(b)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, f.Path), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyFile(dir, f); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "p-00003.dpb has sha256 ") {
		t.Fatalf("content mismatch: %v", err)
	}
	if err := VerifyReader(bytes.NewReader(b[:len(b)-1]), f); !errors.Is(err, ErrChecksum) {
		t.Fatalf("short stream: %v", err)
	}
	missing := f
	missing.Path = "p-00009.dpb"
	if err := VerifyFile(dir, missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReadFileChecksWhatTheManifestClaims(t *testing.T) {
	dir := t.TempDir()
	recs := testRecords(t, 5)
	b, f := writeFile(t, recs)
	if err := os.WriteFile(filepath.Join(dir, f.Path), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := ReadFile(dir, f, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, recs)

	noop := func(Record) error { return nil }
	lie := f
	lie.Records = 4
	if err := ReadFile(dir, lie, noop); !errors.Is(err, ErrInvalidManifest) || !strings.Contains(err.Error(), "p-00003.dpb holds 5 records, the manifest says 4") {
		t.Fatalf("record count lie: %v", err)
	}
	lie = f
	lie.LastKey = recs[3].Key
	if err := ReadFile(dir, lie, noop); !errors.Is(err, ErrInvalidManifest) || !strings.Contains(err.Error(), "p-00003.dpb spans keys") {
		t.Fatalf("key range lie: %v", err)
	}
	// A manifest that vouches for a corrupt file: the checksum passes,
	// the Reader does not.
	bad := rawFile([]Record{recs[1], recs[0]}, 2)
	if err := os.WriteFile(filepath.Join(dir, f.Path), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	vouch := f
	vouch.Bytes = int64(len(bad))
	sum := sha256.Sum256(bad)
	vouch.SHA256 = hex.EncodeToString(sum[:])
	if err := ReadFile(dir, vouch, noop); !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "p-00003.dpb: corrupt partition file at byte") {
		t.Fatalf("corrupt file: %v", err)
	}
	stop := errors.New("stop")
	if err := ReadFile(dir, f, func(Record) error { return stop }); !errors.Is(err, ErrChecksum) {
		t.Fatalf("checksum first: %v", err)
	}
}
