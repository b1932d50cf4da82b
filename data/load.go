package data

import (
	"os"
	"strings"
)

// Load reads a dataset from an HDF5 file (a path ending in .h5 or .hdf5) or
// an OGB-layout directory. The build options apply to OGB edge lists only:
// an HDF5 dataset stores its final CSR.
func Load(path string, opt OGBOptions) (*Dataset, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &InputError{File: path, Msg: "cannot open: expected an OGB-layout directory or a .h5 dataset file"}
	}
	if st.IsDir() {
		return LoadOGB(path, opt)
	}
	if l := strings.ToLower(path); strings.HasSuffix(l, ".h5") || strings.HasSuffix(l, ".hdf5") {
		return ReadH5(path)
	}
	return nil, &InputError{File: path, Msg: "not a directory or a .h5/.hdf5 file: expected an OGB-layout directory or a .h5 dataset file"}
}
