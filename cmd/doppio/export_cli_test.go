package main

import "testing"

func TestParseBytesTakesDecimalAndBinaryUnits(t *testing.T) {
	for in, want := range map[string]int64{"50MB": 50_000_000, "512KiB": 512 << 10, "1.5GB": 1_500_000_000, "2GiB": 2 << 30, "100": 100, "7 B": 7} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-5MB", "0", "MB", "5TB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded", in)
		}
	}
}
