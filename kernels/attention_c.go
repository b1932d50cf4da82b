package kernels

/*
// Every function of attention.c taking or returning a vector is inlined,
// so no call passes one across the baseline ABI, which GCC warns about.
#cgo CFLAGS: -Wno-psabi
#include <stdint.h>
void gnn_attention(int avx2, int pass, int64_t heads, int64_t width, int mean, float slope, int drop, uint64_t key,
                   uint32_t thr, float scale, const int32_t* row_ids, const int64_t* ptr, const int32_t* col,
                   const int64_t* src_ptr, const int32_t* src_dst, const int32_t* src_rank, const float* q,
                   const float* t, float* stats, float* alpha, float* out, const float* dout, float* rec, float* dq,
                   float* ddst, int64_t lo, int64_t hi);
*/
import "C"

import "unsafe"

func i32p(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

func i64p(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

func matp(m *Mat) *C.float {
	if m == nil {
		return nil
	}
	return f32p(m.Data)
}

// c runs the task's pass over rows (or sources) [lo, hi) in attention.c.
func (t *attentionTask) c(lo, hi int) {
	at := t.at
	var rowIDs []int32
	if t.drop {
		rowIDs = at.RowIDs
	}
	var sp []int64
	var sd, sr []int32
	if t.e != nil {
		sp, sd, sr = t.e.Ptr, t.e.Dst, t.e.Rank
	}
	C.gnn_attention(cBool(avx2), C.int(t.pass), C.int64_t(at.Heads), C.int64_t(at.Width), cBool(at.Mean), C.float(at.Slope),
		cBool(t.drop), C.uint64_t(t.key), C.uint32_t(t.thr), C.float(t.scale), i32p(rowIDs),
		i64p(t.a.Ptr), i32p(t.a.Col), i64p(sp), i32p(sd), i32p(sr),
		matp(t.q), matp(t.dst), matp(t.stats), matp(t.alpha), matp(t.out), matp(t.dOut), matp(t.rec), matp(t.dq), matp(t.dDst),
		C.int64_t(lo), C.int64_t(hi))
}
