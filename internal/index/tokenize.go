package index

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Token is one term of a text value and its position: the ordinal of the
// token in the field, which phrase matching compares.
type Token struct {
	Term string
	Pos  int
}

// elementGap separates the positions of two elements of an array text field,
// so a phrase never matches across elements.
const elementGap = 1

// Tokenize splits s into terms: maximal runs of letters, digits and marks of
// any script, except that each Han, Hiragana or Katakana character is a term
// of its own (those scripts do not separate words with spaces). Everything
// else separates terms. Text is NFKC-normalized and case-folded, so "Straße",
// "STRASSE" and "ｓｔｒａｓｓｅ" give the same term. Positions start at 0.
func Tokenize(s string) []Token {
	toks, _ := appendTokens(nil, s, 0)
	return toks
}

// appendTokens appends the tokens of s, numbered from pos, and returns the
// next free position.
func appendTokens(dst []Token, s string, pos int) ([]Token, int) {
	if !isASCII(s) && !norm.NFKC.IsNormalString(s) {
		s = norm.NFKC.String(s)
	}
	start := -1
	emit := func(end int) {
		if start >= 0 {
			dst = append(dst, Token{Term: fold(s[start:end]), Pos: pos})
			pos++
			start = -1
		}
	}
	for i, r := range s {
		switch {
		case isIdeograph(r):
			emit(i)
			start = i
			emit(i + utf8.RuneLen(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || (unicode.IsMark(r) && start >= 0):
			if start < 0 {
				start = i
			}
		default:
			emit(i)
		}
	}
	emit(len(s))
	return dst, pos
}

func isIdeograph(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// folders pools case folders: a cases.Caser keeps state between calls.
var folders = sync.Pool{New: func() any { c := cases.Fold(); return &c }}

// fold case-folds a term, without allocating for ASCII lower case.
func fold(t string) string {
	ascii, lower := true, true
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			lower = false
		}
	}
	if ascii {
		if lower {
			return t
		}
		b := []byte(t)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	c := folders.Get().(*cases.Caser)
	defer folders.Put(c)
	return c.String(t)
}
