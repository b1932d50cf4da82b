package datafile

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/gnn-spmd/gnn-spmd/data"
	"github.com/gnn-spmd/gnn-spmd/data/ogb"
)

// Load reads a dataset from a dataset file (a path ending in .h5 or .hdf5)
// or an OGB-layout directory. The build options apply to OGB edge lists
// only: a dataset file stores its final CSR.
func Load(path string, opt ogb.Options) (*data.Dataset, error) {
	st, err := os.Stat(path)
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error()
		}
		return nil, &data.InputError{File: path, Msg: "cannot open (" + reason + "): expected an OGB-layout directory or a .h5 dataset file"}
	}
	if st.IsDir() {
		return ogb.Load(path, opt)
	}
	if l := strings.ToLower(path); strings.HasSuffix(l, ".h5") || strings.HasSuffix(l, ".hdf5") {
		return Read(path)
	}
	return nil, &data.InputError{File: path, Msg: "not a directory or a .h5/.hdf5 file: expected an OGB-layout directory or a .h5 dataset file"}
}
