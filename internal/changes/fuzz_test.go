package changes

import (
	"reflect"
	"testing"

	"github.com/doppio-db/doppio/internal/partition"
)

// FuzzParseCheckpoint: any string either fails to parse or parses to a
// checkpoint whose wire form parses back to the same value.
func FuzzParseCheckpoint(f *testing.F) {
	c := Checkpoint{DB: "db", Positions: []Position{{Partition: 0, SCN: partition.SCN{Generation: 2, Sequence: 9}, Part: 1}, {Partition: 5}}}
	f.Add(c.String())
	f.Add("")
	f.Add("AQRzaG9wBAAAAAABAgEAAgAAAAMAAAAFtylX")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseCheckpoint(s)
		if err != nil {
			return
		}
		again, err := ParseCheckpoint(got.String())
		if err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("%q parsed to %v, whose wire form parses to %v, %v", s, got, again, err)
		}
	})
}
