//go:build amd64 && cgo

package codec

// The AVX2 encoders and decoders (fast_amd64.c), used when the CPU has
// AVX2; they give the reference's bytes and values exactly (TestFastPath).
// The flags make the C arithmetic the Go reference's: ISO C turns off GCC's
// contraction into fused multiply-adds.

/*
#cgo CFLAGS: -O3 -std=c11
#cgo LDFLAGS: -lm
#include <stdint.h>
int gnn_codec_have_avx2(void);
void gnn_quant_encode(uint8_t* dst, const float* src, int64_t rows, int cols, int b, uint32_t k0, uint32_t k1);
void gnn_quant_encode_gather(uint8_t* dst, const float* src, const int32_t* idx, int64_t rows, int cols, int b, uint32_t k0, uint32_t k1);
void gnn_bf16_encode(uint16_t* dst, const float* src, int64_t rows, int cols, uint32_t k0, uint32_t k1);
void gnn_quant_decode(float* dst, const uint8_t* src, int64_t rows, int cols, int b, int64_t srclen);
void gnn_bf16_decode(float* dst, const uint16_t* src, int64_t n);
void gnn_sq_diff(const float* src, const int32_t* idx, int64_t rows, int cols, const float* dec, double out[2]);
void gnn_quant_delta_encode(uint8_t* dst, const float* m, const int32_t* idx, int64_t rows, int cols, int b,
                            uint32_t k0, uint32_t k1, float* ref, float tau, float skip_floor, int every, int phase, uint8_t* bitmap, float* buf,
                            int64_t* kept, double out[2]);
void gnn_quant_decode_add(float* ref, const int32_t* rowsIdx, int64_t rows, const uint8_t* src, int64_t srclen, int cols, int b, float* out);
void gnn_tern_encode(uint8_t* dst, const float* src, const int32_t* idx, int64_t rows, int cols, int64_t first, uint32_t k0, uint32_t k1);
void gnn_tern_decode(float* dst, const uint8_t* src, int64_t srclen, int64_t rows, int cols, int64_t first, uint32_t k0, uint32_t k1);
void gnn_tern_delta_encode(uint8_t* dst, const float* m, const int32_t* idx, int64_t rows, int cols, uint32_t k0, uint32_t k1, float* ref,
                           float tau, float skip_floor, int every, int phase, uint8_t* bitmap, float* buf, int64_t* kept, double out[2]);
void gnn_tern_decode_add(float* ref, const int32_t* rowsIdx, int64_t rows, const uint8_t* src, int64_t srclen, int cols, float* out);
*/
import "C"

import "unsafe"

// fast is whether the AVX2 path runs (tests turn it off to run the
// reference).
var fast = C.gnn_codec_have_avx2() != 0

// FastPath names the encoder in use, for the run's header line.
func FastPath() string {
	if fast {
		return "avx2"
	}
	return "go"
}

func encodeFast(dst []byte, src []float32, rows, cols, b int, seed uint64) bool {
	if !fast || rows == 0 || cols == 0 {
		return false
	}
	key := drawKey(seed)
	s := (*C.float)(unsafe.Pointer(&src[0]))
	if b == 16 {
		C.gnn_bf16_encode((*C.uint16_t)(unsafe.Pointer(&dst[0])), s, C.int64_t(rows), C.int(cols), C.uint32_t(key[0]), C.uint32_t(key[1]))
	} else {
		C.gnn_quant_encode((*C.uint8_t)(unsafe.Pointer(&dst[0])), s, C.int64_t(rows), C.int(cols), C.int(b), C.uint32_t(key[0]), C.uint32_t(key[1]))
	}
	return true
}

// encodeGatherFast is encodeFast of the rows idx of src (quant below 16
// bits, one header per row), without gathering them first.
func encodeGatherFast(dst []byte, src []float32, idx []int32, cols, b int, seed uint64) bool {
	if !fast || len(idx) == 0 || cols == 0 || b == 16 {
		return false
	}
	key := drawKey(seed)
	C.gnn_quant_encode_gather((*C.uint8_t)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), (*C.int32_t)(unsafe.Pointer(&idx[0])),
		C.int64_t(len(idx)), C.int(cols), C.int(b), C.uint32_t(key[0]), C.uint32_t(key[1]))
	return true
}

func decodeFast(dst []float32, src []byte, rows, cols, b int) bool {
	if !fast || rows == 0 || cols == 0 {
		return false
	}
	d := (*C.float)(unsafe.Pointer(&dst[0]))
	if b == 16 {
		C.gnn_bf16_decode(d, (*C.uint16_t)(unsafe.Pointer(&src[0])), C.int64_t(rows*cols))
	} else {
		C.gnn_quant_decode(d, (*C.uint8_t)(unsafe.Pointer(&src[0])), C.int64_t(rows), C.int(cols), C.int(b), C.int64_t(len(src)))
	}
	return true
}

func sqDiffFast(src []float32, idx []int32, cols int, dec []float32) (errSq, normSq float64, ok bool) {
	if !fast || len(idx) == 0 || cols == 0 {
		return 0, 0, false
	}
	var out [2]float64
	C.gnn_sq_diff((*C.float)(unsafe.Pointer(&src[0])), (*C.int32_t)(unsafe.Pointer(&idx[0])), C.int64_t(len(idx)), C.int(cols),
		(*C.float)(unsafe.Pointer(&dec[0])), (*C.double)(unsafe.Pointer(&out[0])))
	return out[0], out[1], true
}

func deltaEncodeFast(dst []byte, m []float32, idx []int32, cols, b int, ref []float32, skip Skip, bitmap []byte, seed uint64, buf []float32) (kept int, errSq, normSq float64) {
	key := drawKey(seed)
	var bm *C.uint8_t
	if bitmap != nil {
		bm = (*C.uint8_t)(unsafe.Pointer(&bitmap[0]))
	}
	var n C.int64_t
	var out [2]float64
	C.gnn_quant_delta_encode((*C.uint8_t)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&m[0])), (*C.int32_t)(unsafe.Pointer(&idx[0])),
		C.int64_t(len(idx)), C.int(cols), C.int(b), C.uint32_t(key[0]), C.uint32_t(key[1]), (*C.float)(unsafe.Pointer(&ref[0])),
		C.float(skip.Tau), C.float(skip.Floor), C.int(skip.Every), C.int(skip.Phase), bm, (*C.float)(unsafe.Pointer(&buf[0])), &n, (*C.double)(unsafe.Pointer(&out[0])))
	return int(n), out[0], out[1]
}

func decodeAddFast(ref []float32, rows []int32, src []byte, cols, b int, out []float32) {
	var o *C.float
	if out != nil {
		o = (*C.float)(unsafe.Pointer(&out[0]))
	}
	C.gnn_quant_decode_add((*C.float)(unsafe.Pointer(&ref[0])), (*C.int32_t)(unsafe.Pointer(&rows[0])), C.int64_t(len(rows)),
		(*C.uint8_t)(unsafe.Pointer(&src[0])), C.int64_t(len(src)), C.int(cols), C.int(b), o)
}

// ternMaxCols is the widest row (a group's, under tern(g)) the C code
// indexes with an int; the reference codes wider ones.
const ternMaxCols = 1 << 28

// ternEncodeFast is ternEncode (the payload's rows after its key, drawn as
// rows first, first+1, ...) of src's rows, or of its rows idx where idx is
// not nil.
func ternEncodeFast(dst []byte, src []float32, idx []int32, rows, cols, first int, key [2]uint32) bool {
	if !fast || rows == 0 || cols == 0 || cols > ternMaxCols {
		return false
	}
	var ip *C.int32_t
	if idx != nil {
		ip = (*C.int32_t)(unsafe.Pointer(&idx[0]))
	}
	C.gnn_tern_encode((*C.uint8_t)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), ip, C.int64_t(rows), C.int(cols),
		C.int64_t(first), C.uint32_t(key[0]), C.uint32_t(key[1]))
	return true
}

// ternDecodeFast is ternDecode.
func ternDecodeFast(dst []float32, src []byte, rows, cols, first int, key [2]uint32) bool {
	if !fast || rows == 0 || cols == 0 || cols > ternMaxCols {
		return false
	}
	C.gnn_tern_decode((*C.float)(unsafe.Pointer(&dst[0])), (*C.uint8_t)(unsafe.Pointer(&src[0])), C.int64_t(len(src)), C.int64_t(rows), C.int(cols),
		C.int64_t(first), C.uint32_t(key[0]), C.uint32_t(key[1]))
	return true
}

// ternDeltaEncodeFast is deltaEncodeFast for tern: the kept rows after the
// key, which it writes where a row is kept.
func ternDeltaEncodeFast(dst []byte, m []float32, idx []int32, cols int, ref []float32, skip Skip, bitmap []byte, seed uint64, buf []float32) (kept int, errSq, normSq float64) {
	key := drawKey(seed)
	var bm *C.uint8_t
	if bitmap != nil {
		bm = (*C.uint8_t)(unsafe.Pointer(&bitmap[0]))
	}
	var n C.int64_t
	var out [2]float64
	C.gnn_tern_delta_encode((*C.uint8_t)(unsafe.Pointer(&dst[ternKey])), (*C.float)(unsafe.Pointer(&m[0])), (*C.int32_t)(unsafe.Pointer(&idx[0])),
		C.int64_t(len(idx)), C.int(cols), C.uint32_t(key[0]), C.uint32_t(key[1]), (*C.float)(unsafe.Pointer(&ref[0])),
		C.float(skip.Tau), C.float(skip.Floor), C.int(skip.Every), C.int(skip.Phase), bm, (*C.float)(unsafe.Pointer(&buf[0])), &n, (*C.double)(unsafe.Pointer(&out[0])))
	if n > 0 {
		putTernKey(dst, key)
	}
	return int(n), out[0], out[1]
}

// ternDecodeAddFast is decodeAddFast for tern (src: the payload, key first).
func ternDecodeAddFast(ref []float32, rows []int32, src []byte, cols int, out []float32) {
	var o *C.float
	if out != nil {
		o = (*C.float)(unsafe.Pointer(&out[0]))
	}
	C.gnn_tern_decode_add((*C.float)(unsafe.Pointer(&ref[0])), (*C.int32_t)(unsafe.Pointer(&rows[0])), C.int64_t(len(rows)),
		(*C.uint8_t)(unsafe.Pointer(&src[0])), C.int64_t(len(src)), C.int(cols), o)
}
