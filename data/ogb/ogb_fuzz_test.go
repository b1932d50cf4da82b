package ogb

import (
	"bytes"
	"compress/gzip"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/h5/h5test"
)

// maxOGBFuzzInput bounds the text of one FuzzLoadOGB input: larger inputs
// only slow the fuzzer down.
const maxOGBFuzzInput = 16 << 10

// ogbFuzzFiles are the files FuzzLoadOGB writes, in the order of its
// arguments.
var ogbFuzzFiles = []string{"raw/num-node-list", "raw/num-edge-list", "raw/edge", "raw/node-feat",
	"raw/node-label", "split/a/train", "split/a/valid", "split/a/test"}

func ogbFuzzAdd(f *testing.F, files ogbFiles, mode uint8) {
	var args []any
	for _, name := range ogbFuzzFiles {
		args = append(args, []byte(files[name]))
	}
	f.Add(append(args, mode)...)
}

// FuzzLoadOGB loads an OGB directory written from fuzzed text (one argument
// per file). mode bit 0 gzips every file, bit 1 leaves node-feat out, and
// mode>>2, when not 0, is the parser's block size, so that lines straddle
// blocks. LoadOGB must return an *data.InputError naming one of the files, or a
// dataset that passes Validate and holds what a plain reference parser reads
// from the text; without a panic, a hang, an allocation out of proportion to
// the files or an open file left behind.
func FuzzLoadOGB(f *testing.F) {
	tiny := ogbTinyFiles()
	for _, mode := range []uint8{0, 1, 2, 3 << 2, 1<<2 | 1, 7 << 2} {
		ogbFuzzAdd(f, tiny, mode)
	}
	variant := func(edit func(ogbFiles)) ogbFiles {
		fs := ogbTinyFiles()
		edit(fs)
		return fs
	}
	for _, fs := range []ogbFiles{
		variant(func(fs ogbFiles) { fs["raw/num-node-list"] = "2147483647\n" }),
		variant(func(fs ogbFiles) { fs["raw/num-edge-list"] = "2147483647\n" }),
		variant(func(fs ogbFiles) { fs["raw/num-edge-list"] = "0\n"; fs["raw/edge"] = "" }),
		variant(func(fs ogbFiles) { fs["raw/num-node-list"] = "5\n5\n" }),
		variant(func(fs ogbFiles) { fs["raw/edge"] = "0,1\r\n0,2\r\n1,2\r\n3,2\r\n4,3" }),
		variant(func(fs ogbFiles) { fs["raw/edge"] = "0,1\n0,2\n1,2\n3,2\n4,5\n" }),
		variant(func(fs ogbFiles) { fs["raw/edge"] = "0,1\n0,2\n1,2\n3,2\n00000000000000000004,-0\n" }),
		variant(func(fs ogbFiles) { fs["raw/node-label"] = "0.0\n1e0\n2.000000000000000000\n10e-1\n-0\n" }),
		variant(func(fs ogbFiles) { fs["raw/node-label"] = "-1\n-1\n-1\n-1\n-1\n" }),
		variant(func(fs ogbFiles) { fs["raw/node-label"] = "0\n1\n16777216\n1\n0\n" }),
		variant(func(fs ogbFiles) {
			fs["raw/node-feat"] = "1e38,3.4028235e38\n-0,.5\n1.17549435e-38,1e-45\n+7,-1.5e+2\n123456789012345678901234567890,5.\n"
		}),
		variant(func(fs ogbFiles) { fs["raw/node-feat"] = "nan,1\n1,inf\n0,0\n0,0\n0,0\n" }),
		variant(func(fs ogbFiles) { fs["raw/node-feat"] = "1,2\n3\n4,5\n6,7\n8,9\n" }),
		variant(func(fs ogbFiles) { fs["split/a/valid"] = "3\n" }),
		variant(func(fs ogbFiles) { fs["split/a/test"] = "2\n2\n" }),
		variant(func(fs ogbFiles) { fs["split/a/train"] = "" }),
	} {
		ogbFuzzAdd(f, fs, 0)
	}
	// Warm up what a first load opens for good (the runtime's poller), so
	// that the descriptor count compares like with like.
	if _, err := Load(writeOGB(f, tiny, true), Options{}); err != nil {
		f.Fatal(err)
	}
	// One directory for all inputs, rewritten for each: creating and
	// removing a tree per input would take most of the fuzzer's time.
	dir := filepath.Join(f.TempDir(), "fuzz")
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)

	f.Fuzz(func(t *testing.T, nodes, edges, edge, feat, label, train, valid, test []byte, mode uint8) {
		texts := [][]byte{nodes, edges, edge, feat, label, train, valid, test}
		size := 0
		for _, b := range texts {
			size += len(b)
		}
		if size > maxOGBFuzzInput {
			t.Skip("input too large")
		}
		files := ogbFiles{}
		var disk int64
		for i, name := range ogbFuzzFiles {
			p := filepath.Join(dir, filepath.FromSlash(name)) + ".csv"
			os.Remove(p)
			os.Remove(p + ".gz")
			if name == "raw/node-feat" && mode&2 != 0 {
				continue
			}
			files[name] = string(texts[i])
			data := texts[i]
			if mode&1 != 0 {
				zbuf.Reset()
				zw.Reset(&zbuf)
				zw.Write(data)
				zw.Close()
				p, data = p+".gz", zbuf.Bytes()
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			disk += int64(len(data))
		}
		if chunk := int(mode >> 2); chunk > 0 {
			setOGBChunking(t, chunk, 1)
		}
		// Rows are preallocated from the file sizes, a gzip'd file's
		// times the largest deflate ratio.
		lim := h5test.Limits{Time: 5 * time.Second, Alloc: 64<<20 + 16*uint64(disk)}
		if mode&1 != 0 {
			lim.Alloc += 16 * maxGzipRatio * uint64(disk)
		}
		var ds *data.Dataset
		err := h5test.Call(t, lim, func() (err error) {
			ds, err = Load(dir, Options{})
			return err
		})
		if err != nil {
			var names []string
			for _, name := range ogbFuzzFiles {
				p := filepath.Join(dir, filepath.FromSlash(name))
				names = append(names, p+".csv", p+".csv.gz")
			}
			names = append(names, filepath.Join(dir, "split"), filepath.Join(dir, "split", "a"))
			h5test.RequireInputError(t, err, names...)
			return
		}
		if err := ds.Validate(dir); err != nil {
			t.Fatalf("LoadOGB returned a dataset that fails Validate: %v", err)
		}
		checkOGBReference(t, ds, files)
	})
}

// ogbRefLines cuts a text into lines as the loader does: '\n' ends a line,
// the last one may lack it, and one '\r' before the end is dropped.
func ogbRefLines(text string) [][]byte {
	b := []byte(text)
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{'\n'})
	lines := bytes.Split(b, []byte{'\n'})
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte{'\r'})
	}
	return lines
}

// ogbRefInt parses an integer field the way the files hold them: an optional
// '-' and decimal digits.
func ogbRefInt(t *testing.T, field []byte) int64 {
	t.Helper()
	s := string(field)
	digits := s
	if len(s) > 0 && s[0] == '-' {
		digits = s[1:]
	}
	if digits == "" || bytes.ContainsFunc([]byte(digits), func(r rune) bool { return r < '0' || r > '9' }) {
		t.Fatalf("the loader accepted the integer field %q", field)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("the loader accepted the integer field %q: %v", field, err)
	}
	return v
}

// ogbRefIntColumn parses a file of one integer per line.
func ogbRefIntColumn(t *testing.T, text string) []int64 {
	var out []int64
	for _, l := range ogbRefLines(text) {
		out = append(out, ogbRefInt(t, l))
	}
	return out
}

// checkOGBReference compares a loaded dataset with a plain reading of the
// files it was loaded from (which the loader accepted, so every line is
// well formed).
func checkOGBReference(t *testing.T, ds *data.Dataset, files ogbFiles) {
	t.Helper()
	n := ogbRefIntColumn(t, files["raw/num-node-list"])
	e := ogbRefIntColumn(t, files["raw/num-edge-list"])
	g := ds.Graph
	if len(n) != 1 || len(e) != 1 || int64(g.N) != n[0] || g.NumEdges() != e[0] {
		t.Fatalf("loaded N=%d E=%d from counts %v and %v", g.N, g.NumEdges(), n, e)
	}

	// Edges: the CSR's rows, as multisets, against the edge list.
	want := make([][]int32, g.N)
	for _, l := range ogbRefLines(files["raw/edge"]) {
		src, dst, ok := bytes.Cut(l, []byte{','})
		if !ok {
			t.Fatalf("the loader accepted the edge line %q", l)
		}
		s, d := ogbRefInt(t, src), ogbRefInt(t, dst)
		if min(s, d) < 0 || max(s, d) >= int64(g.N) {
			t.Fatalf("the loader accepted the edge line %q for %d nodes", l, g.N)
		}
		want[d] = append(want[d], int32(s))
	}
	for i := range g.N {
		got := slices.Clone(g.Indices[g.Indptr[i]:g.Indptr[i+1]])
		slices.Sort(got)
		slices.Sort(want[i])
		if !slices.Equal(got, want[i]) {
			t.Fatalf("row %d holds sources %v, the edge list %v", i, got, want[i])
		}
	}

	// Labels: integral decimals ("3", "3.0", "30e-1").
	labels := ogbRefLines(files["raw/node-label"])
	top := int32(-1)
	for i, l := range labels {
		r, ok := new(big.Rat).SetString(string(l))
		if !ok || !r.IsInt() || r.Num().Int64() != int64(ds.Labels[i]) {
			t.Fatalf("node %d: label %d loaded from %q", i, ds.Labels[i], l)
		}
		top = max(top, ds.Labels[i])
	}
	if len(labels) != g.N || ds.NumClasses != int(top)+1 {
		t.Fatalf("%d labels, %d classes for %d label lines with top %d", len(ds.Labels), ds.NumClasses, len(labels), top)
	}

	// Features: strconv's float32 reading, bit for bit.
	if text, ok := files["raw/node-feat"]; ok {
		rows := ogbRefLines(text)
		if len(rows) != g.N {
			t.Fatalf("%d feature rows for %d nodes", len(rows), g.N)
		}
		fcols := len(bytes.Split(rows[0], []byte{','}))
		if ds.NumFeatures != fcols {
			t.Fatalf("%d features loaded, line 1 has %d columns", ds.NumFeatures, fcols)
		}
		for i, row := range rows {
			for j, field := range bytes.Split(row, []byte{','}) {
				v, err := strconv.ParseFloat(string(field), 32)
				got := ds.Features[i*fcols+j]
				if err != nil || math.Float32bits(float32(v)) != math.Float32bits(got) {
					t.Fatalf("feature [%d, %d] loaded as %v (%#x) from %q (strconv: %v, %v)", i, j, got, math.Float32bits(got), field, v, err)
				}
			}
		}
	} else if ds.NumFeatures != 0 || ds.Features != nil {
		t.Fatalf("%d features without node-feat", ds.NumFeatures)
	}

	// The split: sorted ids.
	s := ds.Splits["a"]
	if len(ds.Splits) != 1 || s == nil {
		t.Fatalf("splits %v, want just a", ds.SplitNames())
	}
	for _, part := range []struct {
		name string
		got  []int32
	}{{"train", s.Train}, {"valid", s.Valid}, {"test", s.Test}} {
		var want []int32
		for _, v := range ogbRefIntColumn(t, files["split/a/"+part.name]) {
			want = append(want, int32(v))
		}
		slices.Sort(want)
		if !slices.Equal(part.got, want) {
			t.Fatalf("split a/%s loaded as %v, the file holds %v", part.name, part.got, want)
		}
	}
}

// FuzzOGBNumbers checks the number scanners of the text loaders against
// plain references: scanFloat32 against strconv (bit for bit, via
// checkOGBFloat), scanInt against the exact value of its digits, and
// scanIntegral against exact rational arithmetic.
func FuzzOGBNumbers(f *testing.F) {
	for _, s := range []string{"0", "-0", "7", "-12345678", "123456789", "99999999999999999999", "288230376151711744",
		"1.5", "-2.5e-3", ".5", "5.", "1e38", "3.4028235e38", "3.4028236e38", "1e-45", "7e-46", "1.17549435e-38",
		"0.000000000000000000000000000000000000000000001", "123456789012345678901234567890", "30e-1", "3.0",
		"2.000000000000000000", "1e19", "9223372036854775807", "+3", "1_0", "0x1p3", "nan", "inf", "1e", "-", "",
		"16777217", "0.1", "8388609.5", "1,2", "3\r", "1e100000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 256 {
			t.Skip("input too large")
		}
		checkOGBFloat(t, string(b))

		// scanInt: an optional '-' and the longest run of digits after it.
		neg := len(b) > 0 && b[0] == '-'
		start := 0
		if neg {
			start = 1
		}
		end := start
		for end < len(b) && b[end] >= '0' && b[end] <= '9' {
			end++
		}
		v, j, ok := scanInt(b, 0)
		if ok != (end > start) || (ok && j != end) {
			t.Fatalf("scanInt(%q) = %d, %d, %v; the digits run to %d", b, v, j, ok, end)
		}
		if ok {
			exact, _ := new(big.Int).SetString(string(b[start:end]), 10)
			if neg {
				exact.Neg(exact)
			}
			checkSaturated(t, "scanInt", b, v, new(big.Rat).SetInt(exact))
		}

		// scanIntegral: accepts a decimal form exactly when its value is an
		// integer (within the 19 mantissa digits scanDecimal reads).
		if _, exp, _, j, dok := scanDecimal(b, 0); dok && exp > -400 && exp < 400 {
			v, j2, ok := scanIntegral(b, 0)
			if j2 != j {
				t.Fatalf("scanIntegral(%q) read %d bytes, scanDecimal %d", b, j2, j)
			}
			r, rok := new(big.Rat).SetString(string(b[:j]))
			if !rok {
				t.Fatalf("scanIntegral(%q) read %q, which is no number", b, b[:j])
			}
			if ok != r.IsInt() {
				t.Fatalf("scanIntegral(%q) = %d, %v; the value %s", b, v, ok, r.RatString())
			}
			if ok {
				checkSaturated(t, "scanIntegral", b, v, r)
			}
		}
	})
}

// checkSaturated checks a scanned integer v against its exact value: equal
// when the magnitude is below 2^58; else of the same sign and a magnitude in
// [2^58, 2^62] (the scanners saturate; every range they are checked
// against is far below that).
func checkSaturated(t *testing.T, name string, b []byte, v int64, exact *big.Rat) {
	t.Helper()
	lim := new(big.Rat).SetInt64(1 << 58)
	if new(big.Rat).Abs(exact).Cmp(lim) < 0 {
		if exact.Cmp(new(big.Rat).SetInt64(v)) != 0 {
			t.Fatalf("%s(%q) = %d, exact %s", name, b, v, exact.RatString())
		}
		return
	}
	if a := max(v, -v); a < 1<<58 || a > 1<<62 || (v < 0) != (exact.Sign() < 0) {
		t.Fatalf("%s(%q) = %d, exact %s (beyond 2^58: want a saturated value)", name, b, v, exact.RatString())
	}
}
