//go:build amd64 && !purego

#include "textflag.h"
#include "go_asm.h"

// 0, 1, ..., 15: the ids of the first vector of 16 logits.
DATA iota16<>+0(SB)/4, $0
DATA iota16<>+4(SB)/4, $1
DATA iota16<>+8(SB)/4, $2
DATA iota16<>+12(SB)/4, $3
DATA iota16<>+16(SB)/4, $4
DATA iota16<>+20(SB)/4, $5
DATA iota16<>+24(SB)/4, $6
DATA iota16<>+28(SB)/4, $7
DATA iota16<>+32(SB)/4, $8
DATA iota16<>+36(SB)/4, $9
DATA iota16<>+40(SB)/4, $10
DATA iota16<>+44(SB)/4, $11
DATA iota16<>+48(SB)/4, $12
DATA iota16<>+52(SB)/4, $13
DATA iota16<>+56(SB)/4, $14
DATA iota16<>+60(SB)/4, $15
GLOBL iota16<>(SB), RODATA|NOPTR, $64

// func maxAVX512(xs []float32, vals *[16]float32, ids *[16]int32) (ok bool)
TEXT ·maxAVX512(SB), NOSPLIT, $0-41
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	MOVQ vals+24(FP), DI
	MOVQ ids+32(FP), R8
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0        // lane maxima, from -Inf
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z4        // +Inf
	VPXORD Z1, Z1, Z1          // ids of the lane maxima
	VMOVDQU32 iota16<>(SB), Z2 // ids of the current vector
	MOVL $16, AX
	VPBROADCASTD AX, Z3
	KXORW K2, K2, K2           // lanes that saw NaN or +Inf
	XORQ BX, BX

maxloop:
	VMOVUPS (SI)(BX*4), Z5
	VCMPPS $0x05, Z4, Z5, K3   // !(x < +Inf): NaN or +Inf
	KORW K3, K2, K2
	VCMPPS $0x1e, Z0, Z5, K1   // x > lane maximum (false for NaN): the first id of a tie stays
	VMOVAPS Z5, K1, Z0
	VMOVDQA32 Z2, K1, Z1
	VPADDD Z3, Z2, Z2
	ADDQ $16, BX
	CMPQ BX, CX
	JB maxloop

	VMOVUPS Z0, (DI)
	VMOVDQU32 Z1, (R8)
	KORTESTW K2, K2
	SETEQ ok+40(FP)
	VZEROUPPER
	RET

// func minAtLeastAVX512(xs []float32, thr float32) float32
TEXT ·minAtLeastAVX512(SB), NOSPLIT, $0-36
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	VBROADCASTSS thr+24(FP), Z1
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z0        // lane minima, from +Inf
	XORQ BX, BX

minloop:
	VMOVUPS (SI)(BX*4), Z2
	VCMPPS $0x1d, Z1, Z2, K1   // x >= thr
	VMINPS Z2, Z0, K1, Z0
	ADDQ $16, BX
	CMPQ BX, CX
	JB minloop

	VEXTRACTF64X4 $1, Z0, Y1
	VMINPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMINPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMINPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VMINSS X1, X0, X0
	MOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func weighAVX512(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (staged int)
//
// Eight tokens per iteration, one per float64 lane, with the operations of
// weighTokens in the same order and no fused multiply-adds.
TEXT ·weighAVX512(SB), NOSPLIT, $0-112
	MOVQ f+0(FP), DI
	MOVQ xs_base+8(FP), SI
	MOVQ xs_len+16(FP), CX
	MOVQ bk_base+32(FP), R8
	MOVQ stB_base+56(FP), R9
	MOVQ stQ_base+80(FP), R10
	LEAQ ·expTable(SB), R11

	VBROADCASTSD weighFrame_max(DI), Z16
	VBROADCASTSD weighFrame_invT(DI), Z17
	VBROADCASTSD weighFrame_scale(DI), Z18
	VPXORQ Z31, Z31, Z31
	VSUBPD Z18, Z31, Z18       // -scale: y*-scale rounds like -y*scale
	VBROADCASTSD ·expConsts+expConstants_stepsPerNat(SB), Z19
	VBROADCASTSD ·expConsts+expConstants_roundMagic(SB), Z20
	VBROADCASTSD ·expConsts+expConstants_natsPerStep(SB), Z21
	VBROADCASTSD ·expConsts+expConstants_sixth(SB), Z22
	VBROADCASTSD ·expConsts+expConstants_half(SB), Z23
	VBROADCASTSD ·expConsts+expConstants_one(SB), Z24
	VBROADCASTSD ·expConsts+expConstants_floor(SB), Z25
	VBROADCASTSD ·expConsts+expConstants_unit(SB), Z26
	VPBROADCASTQ ·expConsts+expConstants_low8(SB), Z27
	VPBROADCASTQ ·expConsts+expConstants_unbias(SB), Z28
	VPBROADCASTD ·expConsts+expConstants_overflow(SB), Y29
	VMOVUPD weighFrame_z(DI), Z14
	VMOVUPD weighFrame_sx(DI), Z15
	MOVQ R9, R12
	XORQ BX, BX

weighloop:
	// y = max((x - max) * invT, expFloor)
	VCVTPS2PD (SI)(BX*4), Z0
	VSUBPD Z16, Z0, Z0
	VMULPD Z17, Z0, Z0
	VMAXPD Z25, Z0, Z0
	// expNeg: t = y*stepsPerNat + magic; r = y - (t - magic)*natsPerStep
	VMULPD Z19, Z0, Z1
	VADDPD Z20, Z1, Z1
	VSUBPD Z20, Z1, Z2
	VMULPD Z21, Z2, Z2
	VSUBPD Z2, Z0, Z2
	// p = ((r/6 + 1/2) r + 1) r + 1
	VMULPD Z22, Z2, Z3
	VADDPD Z23, Z3, Z3
	VMULPD Z2, Z3, Z3
	VADDPD Z24, Z3, Z3
	VMULPD Z2, Z3, Z3
	VADDPD Z24, Z3, Z3
	// e = bits(expTable[k&255] + (k>>8 + unbias)<<52) * p
	VPANDQ Z27, Z1, Z4
	KXNORB K1, K1, K1
	VGATHERQPD (R11)(Z4*8), K1, Z5
	VPSRLQ $8, Z1, Z6
	VPADDQ Z28, Z6, Z6
	VPSLLQ $52, Z6, Z6
	VPADDQ Z6, Z5, Z5
	VMULPD Z3, Z5, Z5
	// z += e; sx += y*e
	VADDPD Z5, Z14, Z14
	VMULPD Z5, Z0, Z6
	VADDPD Z6, Z15, Z15
	// bucket = min(int(-y*scale), overflow)
	VMULPD Z18, Z0, Z7
	VCVTTPD2DQ Z7, Y7
	VPMINSD Y29, Y7, Y7
	VPMOVDW Y7, X11
	VMOVDQU X11, (R8)(BX*2)
	// q = int(e*2^40 + 1/2), staged with the bucket if it is regular
	VMULPD Z26, Z5, Z8
	VADDPD Z23, Z8, Z8
	VCVTTPD2QQ Z8, Z8
	VPCMPD $1, Y29, Y7, K2
	VPCOMPRESSQ Z8, K2, Z9
	VMOVDQU64 Z9, (R10)
	VPCOMPRESSD Y7, K2, Y10
	VMOVDQU32 Y10, (R9)
	KMOVB K2, AX
	POPCNTL AX, AX
	LEAQ (R10)(AX*8), R10
	LEAQ (R9)(AX*4), R9
	ADDQ $8, BX
	CMPQ BX, CX
	JB weighloop

	VMOVUPD Z14, weighFrame_z(DI)
	VMOVUPD Z15, weighFrame_sx(DI)
	SUBQ R12, R9
	SHRQ $2, R9
	MOVQ R9, staged+104(FP)
	VZEROUPPER
	RET

// func matchAVX512(bk []uint16, b uint16, out []int32) (i, n int)
TEXT ·matchAVX512(SB), NOSPLIT, $0-72
	MOVQ bk_base+0(FP), SI
	MOVQ bk_len+8(FP), CX
	MOVWLZX b+24(FP), AX
	VPBROADCASTW AX, Z0
	MOVQ out_base+32(FP), DI
	MOVQ out_len+40(FP), R8
	XORQ BX, BX
	XORQ DX, DX
	TESTQ R8, R8
	JZ matchdone

matchloop:
	CMPQ BX, CX
	JAE matchdone
	VPCMPEQW (SI)(BX*2), Z0, K1
	KMOVD K1, AX
	TESTL AX, AX
	JZ matchnext

matchhit:
	TZCNTL AX, R9
	ADDQ BX, R9
	MOVL R9, (DI)(DX*4)
	INCQ DX
	CMPQ DX, R8
	JAE matchfull
	BLSRL AX, AX
	JNZ matchhit

matchnext:
	ADDQ $32, BX
	JMP matchloop

matchfull:
	ADDQ $32, BX

matchdone:
	MOVQ BX, i+56(FP)
	MOVQ DX, n+64(FP)
	VZEROUPPER
	RET
