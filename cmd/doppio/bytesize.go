package main

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"
)

// byteSize is a flag holding a number of bytes written as 1048576, 50MB
// (decimal) or 50MiB (binary).
type byteSize int64

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("%q is not a size (e.g. 50MB, 64MiB, 1048576)", s)
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("%q is too large", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return humanize.Bytes(uint64(*b))
}

func (b *byteSize) Type() string { return "size" }
