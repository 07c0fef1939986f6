package partition

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/doppio-db/doppio/internal/scn"
)

// SCN is defined in internal/scn so light packages can name it.
type SCN = scn.SCN

// ParseSCN parses "g:s".
func ParseSCN(v string) (SCN, error) {
	g, s, ok := strings.Cut(v, ":")
	if !ok {
		return SCN{}, fmt.Errorf("SCN %q is not generation:sequence", v)
	}
	gen, err1 := strconv.ParseUint(g, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil {
		return SCN{}, fmt.Errorf("SCN %q is not generation:sequence", v)
	}
	return SCN{Generation: gen, Sequence: seq}, nil
}
