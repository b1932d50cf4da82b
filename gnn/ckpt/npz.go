package ckpt

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gnn-spmd/gnn-spmd/data/outfile"
)

// WriteNPZ writes the parameters' values as a NumPy .npz archive, as
// numpy.savez does: an uncompressed zip holding <name>.npy for every
// parameter, a float32 C-order array of shape [rows, cols]. The write is
// atomic (outfile.WriteStream).
func WriteNPZ(path string, params []Param) error {
	return outfile.WriteStream(path, func(w io.Writer) error { return writeNPZ(w, params) })
}

func writeNPZ(f io.Writer, params []Param) error {
	zw := zip.NewWriter(f)
	for _, p := range params {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.Name + ".npy", Method: zip.Store})
		if err != nil {
			return err
		}
		if _, err := w.Write(npyHeader(p.Rows, p.Cols)); err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, p.W); err != nil {
			return err
		}
	}
	return zw.Close()
}

// npyHeader is the header of a .npy file (format version 1.0) holding a
// little-endian float32 C-order array of shape (rows, cols): the magic
// string, the version, the length of the header dict and the dict as a
// Python literal, padded with spaces and ended by a newline so that the data
// start at a multiple of 64 bytes.
func npyHeader(rows, cols int) []byte {
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	const prefix = 10 // magic (6 bytes), version (2), dict length (2)
	pad := 63 - (prefix+len(dict))%64
	h := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(h[8:], uint16(len(dict)+pad+1))
	h = append(h, dict...)
	h = append(h, bytes.Repeat([]byte{' '}, pad)...)
	return append(h, '\n')
}
