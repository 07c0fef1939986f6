package builder

import (
	"bufio"
	"io"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

type (
	keysTuple = keys.Tuple
	docMap    = schema.Document
)

// lineWriter writes newline-terminated lines, keeping the first error.
type lineWriter struct {
	bw  *bufio.Writer
	err error
}

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{bw: bufio.NewWriterSize(w, 256<<10)} }

func (l *lineWriter) line(b []byte) {
	if l.err == nil {
		_, l.err = l.bw.Write(b)
	}
	if l.err == nil {
		l.err = l.bw.WriteByte('\n')
	}
}

func (l *lineWriter) flush() error {
	if l.err != nil {
		return l.err
	}
	return l.bw.Flush()
}
