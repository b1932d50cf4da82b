#include "textflag.h"

// func gatherAxpy(y, x []float32, f int, cols []int32, vals []float32, pf []int32)
//
// For k in order: y[0:f] += a_k * x[cols[k]*f : cols[k]*f+f], a_k = vals[k]
// (1 when vals is empty), with a separate MULPS and ADDPS per element so the
// bits equal the plain Go loop. Before step k it prefetches the source row
// pf[k] (if k < len(pf)). The caller checks every index.
TEXT ·gatherAxpy(SB), NOSPLIT, $0-128
	MOVQ y_base+0(FP), DI
	MOVQ x_base+24(FP), SI
	MOVQ f+48(FP), DX
	MOVQ cols_base+56(FP), R8
	MOVQ cols_len+64(FP), R9
	MOVQ vals_base+80(FP), R10
	MOVQ vals_len+88(FP), R12
	MOVQ pf_base+104(FP), R13
	MOVQ pf_len+112(FP), R14
	SHLQ $2, DX              // DX = row bytes
	XORQ R11, R11            // k = 0
	CMPQ R9, $0
	JE   done

nnz:
	// Prefetch source row pf[k], every cache line it touches.
	CMPQ    R11, R14
	JAE     noprefetch
	MOVLQSX (R13)(R11*4), BX
	IMULQ   DX, BX
	ADDQ    SI, BX           // BX = row start
	LEAQ    (BX)(DX*1), CX  // CX = row end
	ANDQ    $-64, BX

pfloop:
	PREFETCHT0 (BX)
	ADDQ       $64, BX
	CMPQ       BX, CX
	JB         pfloop

noprefetch:
	// X0 = broadcast a_k.
	CMPQ   R12, $0
	JE     one
	MOVSS  (R10)(R11*4), X0
	JMP    bcast

one:
	MOVL   $0x3f800000, AX
	MOVL   AX, X0

bcast:
	SHUFPS $0, X0, X0

	MOVLQSX (R8)(R11*4), BX
	IMULQ   DX, BX
	ADDQ    SI, BX           // BX = source row
	MOVQ    DI, AX           // AX = y
	MOVQ    DX, CX
	SHRQ    $2, CX           // CX = elements left

loop16:
	CMPQ   CX, $16
	JL     loop4
	MOVUPS (BX), X1
	MOVUPS 16(BX), X2
	MOVUPS 32(BX), X3
	MOVUPS 48(BX), X4
	MULPS  X0, X1
	MULPS  X0, X2
	MULPS  X0, X3
	MULPS  X0, X4
	MOVUPS (AX), X5
	MOVUPS 16(AX), X6
	MOVUPS 32(AX), X7
	MOVUPS 48(AX), X8
	ADDPS  X1, X5
	ADDPS  X2, X6
	ADDPS  X3, X7
	ADDPS  X4, X8
	MOVUPS X5, (AX)
	MOVUPS X6, 16(AX)
	MOVUPS X7, 32(AX)
	MOVUPS X8, 48(AX)
	ADDQ   $64, BX
	ADDQ   $64, AX
	SUBQ   $16, CX
	JMP    loop16

loop4:
	CMPQ   CX, $4
	JL     loop1
	MOVUPS (BX), X1
	MULPS  X0, X1
	MOVUPS (AX), X5
	ADDPS  X1, X5
	MOVUPS X5, (AX)
	ADDQ   $16, BX
	ADDQ   $16, AX
	SUBQ   $4, CX
	JMP    loop4

loop1:
	CMPQ  CX, $0
	JE    next
	MOVSS (BX), X1
	MULSS X0, X1
	MOVSS (AX), X5
	ADDSS X1, X5
	MOVSS X5, (AX)
	ADDQ  $4, BX
	ADDQ  $4, AX
	DECQ  CX
	JMP   loop1

next:
	INCQ R11
	CMPQ R11, R9
	JB   nnz

done:
	RET
