package backup

import (
	"strings"
	"testing"
)

func TestFramesRoundTripAndATruncatedStreamIsAnError(t *testing.T) {
	var b strings.Builder
	fw := NewFrameWriter(&b)
	if err := fw.Info(PartitionInfo{SCN: "2:7"}); err != nil {
		t.Fatal(err)
	}
	tw := fw.TableWriter()
	tw.Write([]byte("table bytes"))
	if err := tw.Finish(); err != nil {
		t.Fatal(err)
	}
	fw.Frame(FrameDone, nil)
	stream := b.String()
	var kinds []byte
	fr := NewFrameReader(strings.NewReader(stream))
	for {
		k, p, err := fr.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
		if k == FrameChunk && string(p) != "table bytes" {
			t.Fatalf("chunk %q", p)
		}
		if k == FrameDone {
			break
		}
	}
	if string(kinds) != "icez" {
		t.Fatalf("frames %q, want icez", kinds)
	}
	fr = NewFrameReader(strings.NewReader(stream[:len(stream)-5]))
	for {
		_, _, err := fr.Next(nil)
		if err != nil {
			if err != ErrTruncated && !strings.Contains(err.Error(), ErrTruncated.Error()) {
				t.Fatalf("truncated stream: %v, want ErrTruncated", err)
			}
			break
		}
	}
}
