package ckpt

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gnn-spmd/gnn-spmd/data/h5"
	"github.com/gnn-spmd/gnn-spmd/data/h5/h5test"
	"github.com/gnn-spmd/gnn-spmd/gnn/compress"
)

// FuzzReadCheckpoint reads checkpoints whose content the fuzzer edits at the
// level of HDF5 objects, written through libhdf5 by h5.WriteFile: a
// byte of an attribute's value or of an array's data XORed, an attribute
// set to an extreme value or given another type, an attribute or array
// dropped, an array reshaped or given another element type. (Editing the
// bytes of a file instead reaches libhdf5's own parsing of corrupt
// metadata, which crashes the process inside libhdf5 1.10 before any Go
// check runs; see data/h5_fuzz_test.go.) Read must return a
// *data.InputError or a checkpoint whose shapes agree with its config, and
// Verify then a *data.InputError or nil for values that hold its
// invariants; without a panic, a hang, an allocation out of proportion to
// the file, or a file descriptor left open.
//
// The input is a list of 5-byte operations: kind, target, a 16-bit
// little-endian position and an argument (see editCheckpoint).
func FuzzReadCheckpoint(f *testing.F) {
	c := toyCheckpoint()
	attrs, arrays := c.attrs(), c.arrays()
	attrAt := func(name string) byte {
		for i, a := range attrs {
			if a.Name == name {
				return byte(i)
			}
		}
		f.Fatalf("no attribute %s", name)
		return 0
	}
	arrayAt := func(path string) byte {
		for i, a := range arrays {
			if a.Path == path {
				return byte(i)
			}
		}
		f.Fatalf("no array %s", path)
		return 0
	}
	op := func(kind, target byte, pos uint16, arg byte) []byte {
		return []byte{kind, target, byte(pos), byte(pos >> 8), arg}
	}
	f.Add([]byte(nil))
	for _, seed := range [][]byte{
		op(opSpecial, attrAt("epoch"), 0, 0),                           // 0
		op(opSpecial, attrAt("epoch"), 0, 4),                           // MaxInt64
		op(opSpecial, attrAt("layers"), 0, 3),                          // MaxInt32
		op(opSpecial, attrAt("hidden"), 0, 3),                          // MaxInt32
		op(opSpecial, attrAt("in_dim"), 0, 3),                          // MaxInt32
		op(opSpecial, attrAt("epochs"), 0, 1),                          // -1
		op(opSpecial, attrAt("adaptive_gmax"), 0, 6),                   // NaN
		op(opSpecial, attrAt("model"), 0, 1),                           // "gcn"
		op(opSpecial, attrAt("schedule"), 0, 5),                        // "fixed"
		op(opSpecial, attrAt("classes"), 0, 2),                         // 1
		op(opXorAttr, attrAt("rng_seed"), 0, 1),                        // seed mismatch
		op(opXorAttr, attrAt("adam_step"), 0, 1),                       // Step != Epoch
		op(opXorAttr, attrAt("format"), 3, 0x20),                       // wrong format
		op(opRetype, attrAt("epoch"), 0, 3),                            // float64
		op(opRetype, attrAt("lr"), 0, 4),                               // string
		op(opRetype, attrAt("dataset_fingerprint"), 0, 0),              // int32
		op(opDrop, 2*attrAt("rng_epoch"), 0, 0),                        // no rng_epoch
		op(opDrop, 2*arrayAt("/metrics/epoch")+1, 0, 0),                // no epoch column
		op(opXorArray, arrayAt("/params/layer0.self_weight"), 3, 0xff), // NaN
		op(opXorArray, arrayAt("/adam/v/layer0.self_weight"), 3, 0x80), // < 0
		op(opXorArray, arrayAt("/metrics/epoch"), 8, 7),                // epochs misnumbered
		op(opXorArray, arrayAt("/adaptive/rates"), 7, 0x80),            // negative rate
		op(opReshape, arrayAt("/params/layer0.self_weight"), 0, 0),     // a row short
		op(opReshape, arrayAt("/metrics/bits"), 0, 1),                  // a row long
		op(opReshape, arrayAt("/adaptive/ref_err"), 0, 3),              // 2-D
		op(opReshape, arrayAt("/metrics/loss"), 0, 5),                  // float32
		op(opReshape, arrayAt("/adaptive/rates"), 0, 0),                // one rate
		append(op(opReshape, arrayAt("/adaptive/rates"), 0, 0), op(opReshape, arrayAt("/adaptive/rates"), 0, 0)...), // none
		op(opXorFile, 0, 40, 0xff),   // the superblock's end-of-file address
		op(opXorFile, 0, 1249, 0xff), // an object header
		op(opXorFile, 0, 5000, 0x80),
	} {
		f.Add(seed)
	}
	// Warm up what a first read opens for good (libhdf5, the runtime's
	// poller), so that the descriptor count compares like with like.
	dir := f.TempDir()
	path := filepath.Join(dir, "c.h5") // rewritten for each input
	if err := h5.WriteFile(path, attrs, arrays); err != nil {
		f.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, ops []byte) {
		at, ar, bytesXor := editCheckpoint(attrs, arrays, ops)
		if err := h5.WriteFile(path, at, ar); err != nil {
			t.Skipf("the edited content cannot be written: %v", err)
		}
		if len(bytesXor) > 0 {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range bytesXor {
				b[e[0]%len(b)] ^= byte(e[1])
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		var got *Checkpoint
		err = h5test.Call(t, h5test.FileLimits(int(st.Size())), func() (err error) {
			got, err = Read(path)
			return err
		})
		if err != nil {
			h5test.RequireInputError(t, err, path)
			return
		}
		if err := checkReadShapes(got); err != nil {
			t.Fatalf("Read returned a checkpoint whose shapes break its config: %v", err)
		}
		err = h5test.Call(t, h5test.Limits{Time: 5 * time.Second, Alloc: 1 << 20}, func() error { return got.Verify(path) })
		if err != nil {
			h5test.RequireInputError(t, err, path)
			return
		}
		if err := checkVerified(got); err != nil {
			t.Fatalf("Verify accepted a checkpoint that breaks an invariant: %v", err)
		}
	})
}

// The kinds of FuzzReadCheckpoint's operations, by kind % opKinds.
const (
	opXorAttr  = iota // XOR byte pos of attribute target's value with arg
	opXorArray        // XOR byte pos of array target's data with arg
	opSpecial         // set attribute target to extreme value arg
	opRetype          // give attribute target type arg
	opDrop            // drop attribute target/2 (even target) or array target/2
	opReshape         // reshape array target or change its element type, by arg
	opXorFile         // XOR byte target<<16|pos (modulo the size) of the written file with arg: its HDF5 structure
	opKinds
)

// editCheckpoint applies ops to copies of a checkpoint's attributes and
// arrays, and returns the edits of the written file's bytes (offset, XOR).
func editCheckpoint(attrs []h5.Attr, arrays []h5.Array, ops []byte) ([]h5.Attr, []h5.Array, [][2]int) {
	var bytesXor [][2]int
	attrs, arrays = slices.Clone(attrs), slices.Clone(arrays)
	for k := 0; k+5 <= len(ops) && k < 5*64; k += 5 {
		kind, target, pos, arg := ops[k]%opKinds, int(ops[k+1]), int(ops[k+2])|int(ops[k+3])<<8, ops[k+4]
		switch kind {
		case opXorFile:
			bytesXor = append(bytesXor, [2]int{target<<16 | pos, int(arg)})
		case opXorAttr, opSpecial, opRetype:
			if len(attrs) == 0 {
				continue
			}
			a := &attrs[target%len(attrs)]
			switch kind {
			case opXorAttr:
				a.Val = xorValue(a.Val, pos, arg)
			case opSpecial:
				a.Val = specialValue(a.Val, arg)
			default:
				a.Val = retype(a.Val, arg)
			}
		case opXorArray, opReshape:
			if len(arrays) == 0 {
				continue
			}
			a := &arrays[target%len(arrays)]
			if kind == opXorArray {
				a.Data = xorArray(a.Data, pos, arg)
			} else {
				*a = reshape(*a, arg)
			}
		case opDrop:
			if target%2 == 0 && len(attrs) > 0 {
				attrs = slices.Delete(attrs, target/2%len(attrs), target/2%len(attrs)+1)
			} else if target%2 == 1 && len(arrays) > 0 {
				arrays = slices.Delete(arrays, target/2%len(arrays), target/2%len(arrays)+1)
			}
		}
	}
	return attrs, arrays, bytesXor
}

// fromLE decodes b into a new value of v's type.
func fromLE[T any](b []byte, v T) T {
	if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
		panic(err)
	}
	return v
}

// xorValue XORs byte pos (modulo the size) of a scalar value with x.
func xorValue(v any, pos int, x byte) any {
	if s, ok := v.(string); ok {
		if s == "" {
			return string([]byte{x})
		}
		b := []byte(s)
		b[pos%len(b)] ^= x
		return string(b)
	}
	b := h5test.LE(v)
	b[pos%len(b)] ^= x
	switch v := v.(type) {
	case int32:
		return fromLE(b, v)
	case int64:
		return fromLE(b, v)
	case uint64:
		return fromLE(b, v)
	case float64:
		return fromLE(b, v)
	}
	panic(fmt.Sprintf("attribute of type %T", v))
}

// specialValue is extreme value k of v's type.
func specialValue(v any, k byte) any {
	ints := []int64{0, -1, 1, math.MaxInt32, math.MaxInt64, math.MinInt64, 1 << 40, 2}
	floats := []float64{0, -1, 1, math.MaxFloat64, -math.MaxFloat64, math.Inf(1), math.NaN(), 1e-310}
	strs := []string{"", "gcn", "sage", "adaptive", "varco", "fixed", "none", "quant"}
	i := int(k) % 8
	switch v.(type) {
	case int32:
		return int32(ints[i])
	case int64:
		return ints[i]
	case uint64:
		return uint64(ints[i])
	case float64:
		return floats[i]
	case string:
		return strs[i]
	}
	panic(fmt.Sprintf("attribute of type %T", v))
}

// retype converts a scalar to type k: int32, int64, uint64, float64 or
// string.
func retype(v any, k byte) any {
	var i int64
	var x float64
	switch v := v.(type) {
	case int32:
		i, x = int64(v), float64(v)
	case int64:
		i, x = v, float64(v)
	case uint64:
		i, x = int64(v), float64(v)
	case float64:
		i, x = int64(v), v
	case string:
		i, x = int64(len(v)), float64(len(v))
	}
	switch k % 5 {
	case 0:
		return int32(i)
	case 1:
		return i
	case 2:
		return uint64(i)
	case 3:
		return x
	}
	return fmt.Sprint(v)
}

// xorArray XORs byte pos (modulo the size) of an array's data with x.
func xorArray(d any, pos int, x byte) any {
	b := h5test.LE(d)
	if len(b) == 0 {
		return d
	}
	b[pos%len(b)] ^= x
	switch d := d.(type) {
	case []int32:
		return fromLE(b, make([]int32, len(d)))
	case []int64:
		return fromLE(b, make([]int64, len(d)))
	case []float32:
		return fromLE(b, make([]float32, len(d)))
	case []float64:
		return fromLE(b, make([]float64, len(d)))
	}
	panic(fmt.Sprintf("array of type %T", d))
}

// reshape changes an array by k: 0 drops its last row, 1 appends a row of
// zeros, 2 swaps the dimensions of a matrix, 3 adds a trailing dimension of
// 1, 4 flattens it, 5 changes its element type (float32 <-> float64, int32
// <-> int64).
func reshape(a h5.Array, k byte) h5.Array {
	a.Dims = slices.Clone(a.Dims)
	n, row := 1, 1 // elements, elements per row
	for i, d := range a.Dims {
		n *= int(d)
		if i > 0 {
			row *= int(d)
		}
	}
	switch k % 6 {
	case 0:
		if len(a.Dims) > 0 && a.Dims[0] > 0 {
			a.Dims[0]--
			a.Data = resize(a.Data, n-row)
		}
	case 1:
		if len(a.Dims) > 0 {
			a.Dims[0]++
			a.Data = resize(a.Data, n+row)
		}
	case 2:
		slices.Reverse(a.Dims)
	case 3:
		a.Dims = append(a.Dims, 1)
	case 4:
		a.Dims = []uint{uint(n)}
	case 5:
		switch d := a.Data.(type) {
		case []int32:
			a.Data = convert[int64](d)
		case []int64:
			a.Data = convert[int32](d)
		case []float32:
			a.Data = convert[float64](d)
		case []float64:
			a.Data = convert[float32](d)
		}
	}
	return a
}

func convert[T, S int32 | int64 | float32 | float64](s []S) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = T(v)
	}
	return out
}

func resize(d any, n int) any {
	switch d := d.(type) {
	case []int32:
		return resizeTo(d, n)
	case []int64:
		return resizeTo(d, n)
	case []float32:
		return resizeTo(d, n)
	case []float64:
		return resizeTo(d, n)
	}
	panic(fmt.Sprintf("array of type %T", d))
}

func resizeTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return slices.Clone(s[:n])
	}
	return append(slices.Clone(s), make([]T, n-len(s))...)
}

// checkReadShapes checks what Read promises: a known model, an epoch within
// the run, and every parameter, moment, schedule state and metrics row of
// the shape the config gives.
func checkReadShapes(c *Checkpoint) error {
	cfg := c.Config.Run
	if cfg.Model != "sage" && cfg.Model != "gcn" {
		return fmt.Errorf("model %q", cfg.Model)
	}
	if c.Epoch < 1 || c.Epoch > cfg.Epochs || len(c.History) != c.Epoch {
		return fmt.Errorf("epoch %d of %d with %d history rows", c.Epoch, cfg.Epochs, len(c.History))
	}
	shapes := cfg.ModelConfig().ParamShapes()
	if len(c.Params) != len(shapes) {
		return fmt.Errorf("%d parameters, the config has %d", len(c.Params), len(shapes))
	}
	for i, p := range c.Params {
		s, n := shapes[i], shapes[i].Rows*shapes[i].Cols
		if p.Name != s.Name || p.Rows != s.Rows || p.Cols != s.Cols || len(p.W) != n || len(p.M) != n || len(p.V) != n {
			return fmt.Errorf("parameter %s [%d, %d] with %d/%d/%d values, the config has %s [%d, %d]",
				p.Name, p.Rows, p.Cols, len(p.W), len(p.M), len(p.V), s.Name, s.Rows, s.Cols)
		}
	}
	if a := c.Adaptive; (a != nil) != (cfg.Compress.Enabled() && cfg.Compress.Schedule == compress.ScheduleAdaptive) {
		return fmt.Errorf("schedule %s with adaptive state %v", cfg.Compress.Schedule, a)
	} else if a != nil && (len(a.RefErr) != len(a.Rates) || len(a.RefRate) != len(a.Rates) || (len(a.Rates) != 0 && len(a.Rates) != cfg.Layers)) {
		return fmt.Errorf("adaptive state of %d/%d/%d entries for %d layers", len(a.Rates), len(a.RefErr), len(a.RefRate), cfg.Layers)
	}
	for i, h := range c.History {
		l := cfg.Layers
		if len(h.Rates) != l || len(h.CompError) != l || len(h.BytesFwdLayer) != l || len(h.BytesBwdLayer) != l || len(h.BytesEvalLayer) != l || len(h.Bits) != l {
			return fmt.Errorf("history row %d has per-layer columns of %d/%d/%d/%d/%d/%d entries for %d layers",
				i, len(h.Rates), len(h.CompError), len(h.BytesFwdLayer), len(h.BytesBwdLayer), len(h.BytesEvalLayer), len(h.Bits), l)
		}
	}
	return nil
}

// checkVerified restates what Verify promises.
func checkVerified(c *Checkpoint) error {
	if c.Config.Data.Fingerprint == 0 || c.Config.Data.PartitionID == 0 || c.Step != c.Epoch {
		return fmt.Errorf("fingerprint %x, partition %x, step %d at epoch %d", c.Config.Data.Fingerprint, c.Config.Data.PartitionID, c.Step, c.Epoch)
	}
	for i, h := range c.History {
		if h.Epoch != i {
			return fmt.Errorf("history row %d is epoch %d", i, h.Epoch)
		}
	}
	for _, p := range c.Params {
		for _, v := range slices.Concat(p.W, p.M, p.V) {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("parameter %s holds %v", p.Name, v)
			}
		}
		for _, v := range p.V {
			if v < 0 {
				return fmt.Errorf("second moment of %s holds %v", p.Name, v)
			}
		}
	}
	if a := c.Adaptive; a != nil {
		for _, v := range slices.Concat([]float64{a.Smoothed, a.GMin, a.GMax}, a.Rates, a.RefErr, a.RefRate) {
			if !(v >= 0 && v <= math.MaxFloat64) {
				return fmt.Errorf("adaptive state holds %v", v)
			}
		}
	}
	return nil
}
