// Package h5scan walks every object of an HDF5 file through libhdf5: the
// groups, each object's attributes (read whole), each dataset's type, shape
// and storage (a contiguous dataset's extent is checked against the file
// size, and small datasets are read whole). libhdf5 1.10 is not memory-safe
// on corrupt metadata (a bad object header or heap can crash it, loop
// forever or allocate without bound), so data/h5 runs Scan in a child
// process under limits before the reading process opens a file: what the
// scan survives, the readers survive.
//
// Surviving is not enough where libhdf5 reads out of bounds without
// crashing: a variable-length value (a string attribute, as h5py and our
// writer store them) names an object in a global heap collection, and
// libhdf5 1.10 trusts that name. An index the collection lacks reads past
// its object table, and an object longer than the value's stated length
// overflows the buffer it is copied into; the child may pass where the
// reader, with another heap layout, crashes. So before reading any
// variable-length value, the scan checks every such reference against the
// collection's bytes, decoded as libhdf5 decodes them (check_heap_refs).
package h5scan

/*
#cgo LDFLAGS: -lhdf5
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct {
	long long file_size;
	long long budget;   // bytes the scan may still read whole
	char msg[512];
} scan_state;

static int failf(scan_state *s, const char *obj, const char *what) {
	snprintf(s->msg, sizeof s->msg, "%s: %s", obj, what);
	return -1;
}

// The file's global heap collections, as check_heap_ref needs them.
static struct {
	int fd;
	long long file_size;
	size_t sizeof_addr, sizeof_len; // from the superblock
	unsigned char *coll;            // the last collection read, whole
	unsigned long long coll_addr, coll_size;
	const char *bad; // why the last check failed
} heaps = {-1};

static unsigned long long le(const unsigned char *p, size_t n) {
	unsigned long long v = 0;
	while (n-- > 0) v = v << 8 | p[n];
	return v;
}

// check_heap_ref returns whether the heap object (addr, idx) exists and
// holds exactly want bytes, decoding its collection as libhdf5 1.10's
// H5HG__cache_heap_deserialize does (H5HG_read then copies the object
// unchecked).
static int check_heap_ref(unsigned long long addr, unsigned long long idx, unsigned long long want) {
	size_t L = heaps.sizeof_len, hdr = 8 + L, objhdr = 8 + L;
	if (idx == 0 || idx > 0xffff) return heaps.bad = "names no object of its global heap", 0;
	if (addr != heaps.coll_addr || !heaps.coll) {
		unsigned char h[16];
		if (addr >= (unsigned long long)heaps.file_size || heaps.file_size - addr < hdr || pread(heaps.fd, h, hdr, addr) != (ssize_t)hdr)
			return heaps.bad = "names a global heap outside the file", 0;
		unsigned long long size = le(h + 8, L);
		if (memcmp(h, "GCOL", 4) != 0 || h[4] != 1)
			return heaps.bad = "names a global heap that is not there", 0;
		// libhdf5 makes collections of at least 4096 bytes.
		if (size < 4096 || size > (unsigned long long)heaps.file_size - addr)
			return heaps.bad = "names a global heap of a size no collection has", 0;
		free(heaps.coll);
		heaps.coll = malloc(size);
		if (!heaps.coll || pread(heaps.fd, heaps.coll, size, addr) != (ssize_t)size)
			return heaps.bad = "names a global heap that cannot be read", 0;
		heaps.coll_addr = addr, heaps.coll_size = size;
	}
	unsigned long long size = heaps.coll_size, begin = 0, obj_size = 0;
	int found = 0;
	for (unsigned long long p = hdr; p < size;) {
		if (p + objhdr > size) break; // a tail too short for a header is free space
		const unsigned char *o = heaps.coll + p;
		unsigned long long i = le(o, 2), n = le(o + 8, L);
		unsigned long long need = i > 0 ? objhdr + ((n + 7) & ~7ULL) : n;
		if (need == 0 || (i > 0 && n > size)) // libhdf5 would loop forever, or wrap
			return heaps.bad = "has a global heap with an object of no or impossible size", 0;
		if (i == idx) found = 1, begin = p, obj_size = n; // the last one wins, as in libhdf5
		if (need > size - p) break;
		p += need;
	}
	if (!found) return heaps.bad = "names no object of its global heap", 0;
	if (obj_size > size - begin - objhdr) return heaps.bad = "names a global heap object that runs past its collection", 0;
	if (obj_size != want) return heaps.bad = "names a global heap object of another length than the value's", 0;
	return 1;
}

// check_heap_ids is a conversion function for variable-length types,
// registered only while the scan checks a value's heap references: it
// reads each element in its file form (length, heap address, object
// index), checks it, and converts it to an empty value, so libhdf5 never
// follows a reference unchecked.
static herr_t check_heap_ids(hid_t src, hid_t dst, H5T_cdata_t *cdata, size_t n, size_t stride, size_t bkg_stride, void *buf, void *bkg, hid_t dxpl) {
	if (cdata->command == H5T_CONV_INIT) {
		cdata->need_bkg = H5T_BKG_NO;
		return 0;
	}
	if (cdata->command != H5T_CONV_CONV) return 0;
	size_t ss = H5Tget_size(src), ds = H5Tget_size(dst), A = heaps.sizeof_addr;
	if (ss != 8 + A) return heaps.bad = "has a variable-length type of an unknown file form", -1;
	size_t base = 1;
	if (H5Tget_class(src) == H5T_VLEN) {
		hid_t super = H5Tget_super(src);
		if (super < 0) return heaps.bad = "has a variable-length type with no element type", -1;
		base = H5Tget_size(super);
		H5Tclose(super);
	}
	size_t sstep = stride ? stride : ss, dstep = stride ? stride : ds;
	// In place: walk backwards where the memory form is the larger.
	for (size_t k = 0; k < n; k++) {
		size_t i = ds > ss ? n - 1 - k : k;
		unsigned char e[24];
		memcpy(e, (unsigned char *)buf + i * sstep, ss);
		unsigned long long len = le(e, 4), addr = le(e + 4, A), idx = le(e + 4 + A, 4);
		if (addr != 0 && !check_heap_ref(addr, idx, len * base)) return -1;
		memset((unsigned char *)buf + i * dstep, 0, ds);
	}
	return 0;
}

// check_heap_refs reads the n variable-length values of attribute a or
// dataset d (of type t, read as mt) through check_heap_ids.
static int check_heap_refs(scan_state *s, const char *obj, hid_t a, hid_t d, hid_t t, hid_t mt, hssize_t n) {
	heaps.bad = NULL;
	if (H5Tregister(H5T_PERS_SOFT, "gnn-spmd heap check", t, mt, check_heap_ids) < 0)
		return failf(s, obj, "cannot check its variable-length values");
	void *vals = calloc(n > 0 ? n : 1, H5Tget_size(mt));
	herr_t rc = -1;
	if (vals) rc = a >= 0 ? H5Aread(a, mt, vals) : H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
	free(vals); // every value read is empty
	H5Tunregister(H5T_PERS_SOFT, "gnn-spmd heap check", t, mt, check_heap_ids);
	if (rc < 0) return failf(s, obj, heaps.bad ? heaps.bad : "cannot read its variable-length values");
	return 0;
}

// var_string_type is a variable-length string of C characters in
// character set cs: the memory type every string read here uses (h5py
// writes UTF-8). -1 on failure.
static hid_t var_string_type(H5T_cset_t cs) {
	hid_t mt = H5Tcopy(H5T_C_S1);
	if (mt < 0) return -1;
	if (H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, cs) < 0) {
		H5Tclose(mt);
		return -1;
	}
	return mt;
}

// c_var_string reports whether the variable-length string type t is one of
// C characters (as h5py and our writer make them; h5dump's CTYPE H5T_C_S1).
// A corrupt file can give it another character type, which libhdf5
// converts by allocating without bound: the scan's memory limit makes that
// allocation fail and the read pass, where the reader would not.
static int c_var_string(hid_t t) {
	hid_t c = var_string_type(H5Tget_cset(t));
	if (c < 0) return 0;
	int ok = H5Tset_strpad(c, H5Tget_strpad(t)) >= 0 && H5Tequal(t, c) > 0;
	H5Tclose(c);
	return ok;
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
	if (H5Tget_class(t) == H5T_VLEN) {
		// A copy of the attribute's or dataset's type is a memory type.
		hid_t mt = H5Tcopy(t);
		int rc = check_heap_refs(s, obj, a, d, t, mt, n);
		H5Tclose(mt);
		if (rc < 0) return -1;
	}
	if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
		if (!c_var_string(t))
			return failf(s, obj, "has a variable-length string type of no known character type");
		hid_t mt = var_string_type(H5Tget_cset(t));
		if (mt < 0) return failf(s, obj, "cannot read its strings");
		if (check_heap_refs(s, obj, a, d, t, mt, n) < 0) {
			H5Tclose(mt);
			return -1;
		}
		char **strs = calloc(n > 0 ? n : 1, sizeof(char *));
		if (!strs) return failf(s, obj, "out of memory");
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
	hid_t fcpl = H5Fget_create_plist(f);
	heaps.fd = open(path, O_RDONLY);
	heaps.file_size = file_size;
	if (fcpl < 0 || H5Pget_sizes(fcpl, &heaps.sizeof_addr, &heaps.sizeof_len) < 0 || heaps.fd < 0 ||
		heaps.sizeof_addr < 2 || heaps.sizeof_addr > 8 || heaps.sizeof_len < 2 || heaps.sizeof_len > 8) {
		if (fcpl >= 0) H5Pclose(fcpl);
		if (heaps.fd >= 0) close(heaps.fd);
		heaps.fd = -1;
		H5Fclose(f);
		strcpy(msg, "has a superblock of unreadable or unknown address and length sizes");
		return -1;
	}
	H5Pclose(fcpl);
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
	close(heaps.fd);
	free(heaps.coll);
	heaps.fd = -1, heaps.coll = NULL;
	strcpy(msg, s.msg);
	return rc < 0 ? -1 : 0;
}

// read_var_string reads the scalar variable-length string attribute a
// into *out (malloc'd, NUL-terminated) through the memory type the scan
// reads it with: C characters of the file's character set, not the file's
// own type, whose character type a corrupt file may make one libhdf5
// converts without bound.
static int read_var_string(hid_t a, char **out) {
	*out = NULL;
	hid_t t = H5Aget_type(a);
	if (t < 0) return -1;
	H5T_cset_t cs = H5Tget_cset(t);
	int ok = c_var_string(t);
	H5Tclose(t);
	if (!ok || (cs != H5T_CSET_ASCII && cs != H5T_CSET_UTF8)) return -1;
	hid_t mt = var_string_type(cs);
	if (mt < 0) return -1;
	char *s = NULL;
	herr_t rc = H5Aread(a, mt, &s);
	H5Tclose(mt);
	if (rc < 0) return -1;
	if (s) {
		*out = strdup(s);
		H5free_memory(s);
		if (!*out) return -1;
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"os"
	"runtime"
	"unsafe"
)

// ReadVarString reads the scalar variable-length string attribute whose
// libhdf5 id is attr, as the scan reads it (see read_var_string); a file
// the scan passed reads the same way here. A missing value reads as "".
func ReadVarString(attr int64) (string, error) {
	var s *C.char
	if C.read_var_string(C.hid_t(attr), &s) != 0 {
		return "", errors.New("cannot read the string")
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

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
