package h5

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSlabbedWrite: arrays larger than one slab are written in several
// hyperslabs and read back whole.
func TestSlabbedWrite(t *testing.T) {
	defer func(s int) { slabBytes = s }(slabBytes)
	slabBytes = 100 // 25 int32s, 3 rows of 7 float32s, 12 int64s per slab
	ints := make([]int32, 103)
	rows := make([]float32, 103*7)
	longs := make([]int64, 50)
	for i := range ints {
		ints[i] = int32(i*7 - 3)
	}
	for i := range rows {
		rows[i] = float32(i) / 3
	}
	for i := range longs {
		longs[i] = int64(i) << 40
	}
	path := filepath.Join(t.TempDir(), "a.h5")
	attrs := []Attr{{Name: "format", Val: "slabs"}, {Name: "version", Val: int32(1)}}
	arrays := []Array{Vec("/ints", ints), {Path: "/g/rows", Data: rows, Dims: []uint{103, 7}}, Vec("/longs", longs)}
	if err := WriteFile(path, attrs, arrays); err != nil {
		t.Fatal(err)
	}
	err := Read(path, "slabs", 1, "no such file", func(f *File) error {
		if got := ReadArray[int32](f, "/ints", "[103]", 103); !slices.Equal(got, ints) {
			t.Errorf("ints read back as %v", got)
		}
		if got := ReadArray[float32](f, "/g/rows", "[103, 7]", 103, 7); !slices.Equal(got, rows) {
			t.Errorf("rows read back differ")
		}
		if got := ReadArray[int64](f, "/longs", "[50]", 50); !slices.Equal(got, longs) {
			t.Errorf("longs read back as %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
