// Package h5scan walks every object of an HDF5 file through libhdf5: the
// groups, each object's attributes (read whole), each dataset's type, shape
// and storage (a contiguous dataset's extent is checked against the file
// size, and small datasets are read whole). libhdf5 1.10 is not memory-safe
// on corrupt metadata (a bad object header or heap can crash it, loop
// forever or allocate without bound), so data/h5 runs Scan in a child
// process under limits before the reading process opens a file: what the
// scan survives, the readers survive.
package h5scan

/*
#cgo LDFLAGS: -lhdf5
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	long long file_size;
	long long budget;   // bytes the scan may still read whole
	char msg[512];
} scan_state;

static int failf(scan_state *s, const char *obj, const char *what) {
	snprintf(s->msg, sizeof s->msg, "%s: %s", obj, what);
	return -1;
}

// read_value reads n values of type t from an attribute (a >= 0) or a
// dataset (d >= 0) into scratch memory, variable-length strings included.
static int read_value(scan_state *s, const char *obj, hid_t a, hid_t d, hid_t t, hssize_t n) {
	if (H5Tget_class(t) == H5T_STRING) {
		// A corrupt character set or padding makes libhdf5 convert
		// (and allocate) without bound.
		H5T_cset_t cs = H5Tget_cset(t);
		H5T_str_t pad = H5Tget_strpad(t);
		if ((cs != H5T_CSET_ASCII && cs != H5T_CSET_UTF8) || (pad != H5T_STR_NULLTERM && pad != H5T_STR_NULLPAD && pad != H5T_STR_SPACEPAD))
			return failf(s, obj, "has a string type of no known character set or padding");
	}
	if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
		char **strs = calloc(n > 0 ? n : 1, sizeof(char *));
		if (!strs) return failf(s, obj, "out of memory");
		hid_t mt = H5Tcopy(H5T_C_S1);
		H5Tset_size(mt, H5T_VARIABLE);
		H5Tset_cset(mt, H5Tget_cset(t)); // h5py writes UTF-8
		herr_t rc = a >= 0 ? H5Aread(a, mt, strs) : H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, strs);
		for (hssize_t i = 0; i < n; i++) free(strs[i]);
		free(strs);
		H5Tclose(mt);
		return rc < 0 ? failf(s, obj, "cannot read its strings") : 0;
	}
	size_t size = H5Tget_size(t);
	if (size == 0 || size > (1 << 20) || (n > 0 && (long long)size * n > s->budget))
		return failf(s, obj, "holds more bytes than the file can");
	void *buf = malloc(size * (n > 0 ? n : 1));
	if (!buf) return failf(s, obj, "out of memory");
	herr_t rc = a >= 0 ? H5Aread(a, t, buf) : H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
	free(buf);
	s->budget -= (long long)size * n;
	return rc < 0 ? failf(s, obj, "cannot be read") : 0;
}

static herr_t scan_attr(hid_t loc, const char *name, const H5A_info_t *info, void *op) {
	scan_state *s = op;
	char obj[300];
	snprintf(obj, sizeof obj, "attribute %s", name);
	hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0) return failf(s, obj, "cannot be opened");
	hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
	int rc = -1;
	if (t < 0 || sp < 0) {
		failf(s, obj, "has no readable type or shape");
	} else {
		hssize_t n = H5Sget_simple_extent_npoints(sp);
		rc = n < 0 ? failf(s, obj, "has no readable shape") : read_value(s, obj, a, -1, t, n);
	}
	if (sp >= 0) H5Sclose(sp);
	if (t >= 0) H5Tclose(t);
	H5Aclose(a);
	return rc;
}

static int scan_dataset(scan_state *s, hid_t d, const char *name) {
	hid_t t = H5Dget_type(d), sp = H5Dget_space(d), pl = H5Dget_create_plist(d);
	int rc = 0;
	if (t < 0 || sp < 0 || pl < 0) {
		rc = failf(s, name, "has no readable type, shape or layout");
		goto done;
	}
	hssize_t n = H5Sget_simple_extent_npoints(sp);
	size_t size = H5Tget_size(t);
	if (n < 0 || size == 0) {
		rc = failf(s, name, "has no readable shape or element size");
		goto done;
	}
	if ((double)n * (double)size > (double)s->file_size * 2 + (1 << 20)) {
		rc = failf(s, name, "holds more bytes than the file can");
		goto done;
	}
	hsize_t stored = H5Dget_storage_size(d);
	if (H5Pget_layout(pl) == H5D_CONTIGUOUS && stored > 0) {
		haddr_t off = H5Dget_offset(d);
		if (off == HADDR_UNDEF || (long long)off < 0 || (long long)off + (long long)stored > s->file_size) {
			rc = failf(s, name, "its data lie outside the file");
			goto done;
		}
	}
	if ((long long)n * (long long)size <= (1 << 20)) rc = read_value(s, name, -1, d, t, n);
done:
	if (pl >= 0) H5Pclose(pl);
	if (sp >= 0) H5Sclose(sp);
	if (t >= 0) H5Tclose(t);
	return rc;
}

static herr_t scan_object(hid_t root, const char *name, const H5O_info_t *info, void *op) {
	scan_state *s = op;
	const char *obj = strcmp(name, ".") == 0 ? "the root group" : name;
	if (H5Aiterate_by_name(root, name, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, scan_attr, s, H5P_DEFAULT) < 0) {
		if (!s->msg[0]) failf(s, obj, "its attributes cannot be listed");
		return -1;
	}
	if (info->type == H5O_TYPE_DATASET) {
		hid_t d = H5Dopen2(root, name, H5P_DEFAULT);
		if (d < 0) return failf(s, obj, "cannot be opened");
		int rc = scan_dataset(s, d, obj);
		H5Dclose(d);
		return rc;
	}
	return 0;
}

static int scan(const char *path, long long file_size, char *msg) {
	scan_state s = {file_size, 2 * file_size + (8 << 20), ""};
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (f < 0) {
		strcpy(msg, "has an HDF5 signature but cannot be opened");
		return -1;
	}
#if H5_VERSION_GE(1, 12, 0)
	herr_t rc = H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_NATIVE, scan_object, &s, H5O_INFO_BASIC);
#else
	herr_t rc = H5Ovisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, scan_object, &s);
#endif
	if (rc < 0 && !s.msg[0]) strcpy(s.msg, "its objects cannot be listed");
	if (H5Fclose(f) < 0 && rc >= 0) {
		strcpy(s.msg, "cannot be closed");
		rc = -1;
	}
	strcpy(msg, s.msg);
	return rc < 0 ? -1 : 0;
}
*/
import "C"

import (
	"errors"
	"os"
	"runtime"
	"unsafe"
)

// Scan walks the HDF5 file at path as described in the package comment
// and returns nil if every object could be read, else what could not (an
// HDF5 object and why). It may crash, hang or exhaust memory on a corrupt
// file: run it in a process of its own.
func Scan(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var msg [512]C.char
	if C.scan(cp, C.longlong(st.Size()), &msg[0]) != 0 {
		return errors.New(C.GoString(&msg[0]))
	}
	return nil
}
