package ogb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/internal/datatest"
)

// checkOGBFloat compares scanFloat32 with strconv.ParseFloat(s, 32) bit for bit,
// including whether the value is accepted (finite and in range).
func checkOGBFloat(t *testing.T, s string) {
	t.Helper()
	want, err := strconv.ParseFloat(s, 32)
	wantOK := err == nil && !math.IsNaN(want) && !math.IsInf(want, 0)
	got, j, ok := scanFloat32([]byte(s), 0)
	ok = ok && j == len(s)
	if ok != wantOK {
		// The fast scanner accepts decimal literals only; strconv also takes
		// hex floats and underscores, which a CSV of numbers never holds.
		if ok || !strings.ContainsAny(s, "xX_") {
			t.Errorf("scanFloat32(%q): ok = %v, strconv ok = %v (err %v)", s, ok, wantOK, err)
		}
		return
	}
	if ok && math.Float32bits(got) != math.Float32bits(float32(want)) {
		t.Errorf("scanFloat32(%q) = %v (%#x), strconv = %v (%#x)", s, got, math.Float32bits(got), float32(want), math.Float32bits(float32(want)))
	}
}

func TestOGBScanFloat32MatchesStrconv(t *testing.T) {
	fixed := []string{
		"0", "-0", "+0", "1", "-1", "0.5", "-1.25e-3", "1e5", "1E5", "1e+5", ".5", "5.", "-.5e1",
		"0.032160804", "0.80703515", "3.4028235e38", "3.4028236e38", "1e39", "-1e39", "1e-39", "1e-46",
		"1.401298464324817e-45", "123456789012345678901234567890", "0.000000000000000000000000001",
		"00000000000000000000000000001.5", "1.00000000000000000000000000001", "16777217", "16777216.5",
		"9007199254740993", "1e22", "1e23", "1e-22", "1e-23", "0e999999999", "1e999999999", "1e-999999999",
		"nan", "NaN", "inf", "-Inf", "infinity", "", "-", "+", ".", "e5", "1e", "1e+", "1.5x", "1,2", " 1",
		"1 ", "0x1p3", "1_0",
	}
	for _, s := range fixed {
		checkOGBFloat(t, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		// Log-uniform magnitudes over float32's range, printed several ways.
		v := math.Exp2(rng.Float64()*120-60) * float64(1-2*rng.IntN(2))
		f32 := float64(float32(v))
		for _, s := range []string{
			fmt.Sprintf("%g", v), fmt.Sprintf("%.6f", v), fmt.Sprintf("%e", v), fmt.Sprintf("%.9g", v),
			strconv.FormatFloat(f32, 'g', -1, 32), strconv.FormatFloat(f32, 'f', -1, 32),
		} {
			checkOGBFloat(t, s)
		}
		// Decimals at and near the midpoint between two float32s: the fast
		// path must not double-round them.
		lo := float32(v)
		hi := math.Nextafter32(lo, float32(math.Inf(1)))
		mid := (float64(lo) + float64(hi)) / 2
		checkOGBFloat(t, strconv.FormatFloat(mid, 'g', -1, 64))
		checkOGBFloat(t, strconv.FormatFloat(mid, 'e', 8, 64))
		checkOGBFloat(t, strconv.FormatFloat(mid, 'e', 15, 64))
	}
	// Short decimals with 1..9 digits, the form the converted files use.
	for range 20000 {
		m := rng.Int64N(1_000_000_000)
		e := rng.IntN(12)
		s := strconv.FormatInt(m, 10)
		for len(s) <= e {
			s = "0" + s
		}
		checkOGBFloat(t, s[:len(s)-e]+"."+s[len(s)-e:])
	}
}

// TestOGBScanFloat32RealFeatures parses every value of the cora and tolokers
// feature files with both parsers.
func TestOGBScanFloat32RealFeatures(t *testing.T) {
	root := datatest.SharedData(t)
	for _, name := range []string{"cora", "tolokers"} {
		f, err := os.Open(filepath.Join(root, name, "raw", "node-feat.csv.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<20)
		seen := map[string]bool{}
		count := 0
		for sc.Scan() {
			for _, s := range strings.Split(sc.Text(), ",") {
				count++
				if !seen[s] {
					seen[s] = true
					checkOGBFloat(t, s)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Logf("%s: %d values, %d distinct", name, count, len(seen))
	}
}

func TestOGBScanInt(t *testing.T) {
	for _, c := range []struct {
		s  string
		v  int64
		j  int
		ok bool
	}{
		{"0", 0, 1, true}, {"123,4", 123, 3, true}, {"-1", -1, 2, true}, {"-", 0, 1, false},
		{"", 0, 0, false}, {"x", 0, 0, false}, {"99999999999999999999999", 1 << 62, 23, true},
	} {
		v, j, ok := scanInt([]byte(c.s), 0)
		if v != c.v || j != c.j || ok != c.ok {
			t.Errorf("scanInt(%q) = %d, %d, %v; want %d, %d, %v", c.s, v, j, ok, c.v, c.j, c.ok)
		}
	}
	for _, c := range []struct {
		s  string
		v  int64
		ok bool
	}{
		{"3", 3, true}, {"3.0", 3, true}, {"-1.000", -1, true}, {"3.000000000000000000e+00", 3, true},
		{"2.5e1", 25, true}, {"3.5", 0, false}, {"1e-1", 0, false}, {"0.0", 0, true}, {"nan", 0, false},
	} {
		v, j, ok := scanIntegral([]byte(c.s), 0)
		ok = ok && j == len(c.s)
		if ok != c.ok || (ok && v != c.v) {
			t.Errorf("scanIntegral(%q) = %d, %v; want %d, %v", c.s, v, ok, c.v, c.ok)
		}
	}
}

// TestOGBDigitRun compares the SWAR digit parser with a byte loop on random
// strings, at every offset so both the 8-byte and the tail path run.
func TestOGBDigitRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const alphabet = "0123456789000999,.-e\n\r /:\x00\xff"
	for range 20000 {
		b := make([]byte, rng.IntN(20))
		for k := range b {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		for i := 0; i <= len(b); i++ {
			var want uint64
			n := 0
			for n < 8 && i+n < len(b) && b[i+n] >= '0' && b[i+n] <= '9' {
				want = want*10 + uint64(b[i+n]-'0')
				n++
			}
			if v, m := digitRun(b, i); v != want || m != n {
				t.Fatalf("digitRun(%q, %d) = %d, %d; want %d, %d", b, i, v, m, want, n)
			}
		}
	}
}

// setOGBChunking runs the rest of a test with tiny blocks and preallocation so
// that block boundaries and output growth are exercised on small inputs.
func setOGBChunking(t *testing.T, chunk, prealloc int) {
	oldC, oldP := chunkSize, preallocCap
	chunkSize, preallocCap = chunk, prealloc
	t.Cleanup(func() { chunkSize, preallocCap = oldC, oldP })
}

// TestOGBScanLinesChunking checks that values, line counts and error line
// numbers do not depend on where the blocks are cut, including lines longer
// than a block, CRLF endings and a missing final newline.
func TestOGBScanLinesChunking(t *testing.T) {
	var sb strings.Builder
	const rows = 300
	for i := range rows {
		if i == 77 {
			sb.WriteString(strings.Repeat("0", 100)) // longer than any block below
			fmt.Fprintf(&sb, "%d,%d\r\n", i, i*7%rows)
			continue
		}
		fmt.Fprintf(&sb, "%d,%d\n", i, i*7%rows)
	}
	good := sb.String()
	for _, chunk := range []int{1, 2, 3, 5, 8, 13, 64, 1 << 20} {
		for _, prealloc := range []int{1, math.MaxInt} {
			setOGBChunking(t, chunk, prealloc)
			for _, in := range []string{good, strings.TrimSuffix(good, "\n")} {
				tab := newIntTable("mem", "a", "b")
				tab.lo, tab.hi, tab.max, tab.bound = 0, rows, rows, rows
				lines, err := scanLines("mem", strings.NewReader(in), tab)
				if err != nil || lines != rows {
					t.Fatalf("chunk %d: lines %d, err %v", chunk, lines, err)
				}
				for i := range rows {
					if tab.cols[0][i] != int32(i) || tab.cols[1][i] != int32(i*7%rows) {
						t.Fatalf("chunk %d: row %d = %d,%d", chunk, i, tab.cols[0][i], tab.cols[1][i])
					}
				}
			}
			// Two bad lines: the first one must be reported, whichever block
			// a worker happens to finish first.
			bad := strings.Replace(good, "\n250,", "\n250x,", 1)
			bad = strings.Replace(bad, "\n150,", "\n-150,", 1)
			tab := newIntTable("mem", "a", "b")
			tab.lo, tab.hi, tab.max, tab.bound, tab.expect = 0, rows, rows, rows, "an id"
			_, err := scanLines("mem", strings.NewReader(bad), tab)
			var ie *data.InputError
			if !errors.As(err, &ie) || ie.Line != 151 || ie.Field != "a" {
				t.Fatalf("chunk %d: got %v, want line 151 field a", chunk, err)
			}
		}
	}
}

func TestOGBFloatTableChunking(t *testing.T) {
	var sb strings.Builder
	const rows, cols = 100, 7
	want := make([]float32, 0, rows*cols)
	rng := rand.New(rand.NewPCG(3, 4))
	for range rows {
		for c := range cols {
			v := float32(rng.NormFloat64())
			if c%2 == 0 {
				v = float32(rng.IntN(2))
			}
			want = append(want, v)
			if c > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		sb.WriteByte('\n')
	}
	for _, chunk := range []int{1, 7, 100, 1 << 20} {
		setOGBChunking(t, chunk, 3)
		tab := &floatTable{path: "mem", max: rows, bound: 1 << 20}
		lines, err := scanLines("mem", strings.NewReader(sb.String()), tab)
		if err != nil || lines != rows || tab.f != cols {
			t.Fatalf("chunk %d: lines %d, f %d, err %v", chunk, lines, tab.f, err)
		}
		if !ogbEqualBits(tab.data[:rows*cols], want) {
			t.Fatalf("chunk %d: values differ", chunk)
		}
	}
}

func ogbEqualBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// ogbSynthText builds in-memory OGB-style text for the parser benchmarks.
func ogbSynthText(edges, rows, cols int) (edgeText, featText []byte) {
	rng := rand.New(rand.NewPCG(5, 6))
	var eb bytes.Buffer
	for range edges {
		fmt.Fprintf(&eb, "%d,%d\n", rng.IntN(2_000_000), rng.IntN(2_000_000))
	}
	var fb bytes.Buffer
	for range rows {
		for c := range cols {
			if c > 0 {
				fb.WriteByte(',')
			}
			if rng.IntN(2) == 0 {
				fb.WriteString(strconv.Itoa(rng.IntN(2)))
			} else {
				fb.WriteString(strconv.FormatFloat(float64(float32(rng.NormFloat64())), 'g', -1, 32))
			}
		}
		fb.WriteByte('\n')
	}
	return eb.Bytes(), fb.Bytes()
}

// BenchmarkOGBParseEdges measures the block reader and the integer parser
// alone, on text already in memory.
func BenchmarkOGBParseEdges(b *testing.B) {
	const edges = 2_000_000
	text, _ := ogbSynthText(edges, 0, 0)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tab := newIntTable("mem", "src", "dst")
		tab.lo, tab.hi, tab.max, tab.bound = 0, 2_000_000, edges, edges
		if _, err := scanLines("mem", bytes.NewReader(text), tab); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOGBParseFeatures measures the float parser on half 0/1 and half
// shortest-form float32 values.
func BenchmarkOGBParseFeatures(b *testing.B) {
	const rows, cols = 20_000, 100
	_, text := ogbSynthText(0, rows, cols)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tab := &floatTable{path: "mem", max: rows, bound: int64(len(text))}
		if _, err := scanLines("mem", bytes.NewReader(text), tab); err != nil {
			b.Fatal(err)
		}
	}
}
