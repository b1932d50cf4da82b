// Package oneline keeps a message on one line: the programs print every
// error as one line, and a path (or any text from the user or a file) can
// hold a newline, a carriage return or a terminal escape.
package oneline

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with each control character except tab (newline,
// carriage return, escape, ...) and each Unicode line or paragraph
// separator written as its Go escape (\n, \r, \x1b, \u2028), so that s
// prints as one line and shows what it holds. s is returned as it is when
// it has none.
func String(s string) string {
	if strings.IndexFunc(s, breaks) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:]) // kept as the byte it is
		case breaks(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func breaks(r rune) bool {
	return r != '\t' && unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085'
}
