package oneline

import "testing"

func TestString(t *testing.T) {
	for in, want := range map[string]string{
		"plain path/ü.h5": "plain path/ü.h5",
		"a\nb":            `a\nb`,
		"a\r\nb\tc":       "a\\r\\nb\tc",
		"x\x1b[31my\x00":  `x\x1b[31my\x00`,
		"p\u2028q\u0085r": `p\u2028q\u0085r`,
		"bad \xff byte\n": `bad \xff byte\n`,
	} {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}
