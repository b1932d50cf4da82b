//go:build !amd64 || !cgo

package codec

// Without AVX2 (another architecture, or no cgo) the Go reference encodes.
var fast = false

// FastPath names the encoder in use, for the run's header line.
func FastPath() string { return "go" }

func encodeFast([]byte, []float32, int, int, int, uint64) bool { return false }

func encodeGatherFast([]byte, []float32, []int32, int, int, uint64) bool { return false }

func decodeFast([]float32, []byte, int, int, int) bool { return false }

func sqDiffFast([]float32, []int32, int, []float32) (float64, float64, bool) { return 0, 0, false }

func deltaEncodeFast([]byte, []float32, []int32, int, int, []float32, Skip, []byte, uint64, []float32) (int, float64, float64) {
	panic("codec: no fused delta kernel")
}

func decodeAddFast([]float32, []int32, []byte, int, int, []float32) {
	panic("codec: no fused delta kernel")
}

func ternEncodeFast([]byte, []float32, []int32, int, int, int, [2]uint32) bool { return false }

func ternDecodeFast([]float32, []byte, int, int, int, [2]uint32) bool { return false }

func ternDeltaEncodeFast([]byte, []float32, []int32, int, []float32, Skip, []byte, uint64, []float32) (int, float64, float64) {
	panic("codec: no fused delta kernel")
}

func ternDecodeAddFast([]float32, []int32, []byte, int, []float32) {
	panic("codec: no fused delta kernel")
}
