//go:build amd64 && !purego

#include "textflag.h"
#include "go_asm.h"

// weighAVX2's frame: constants broadcast to 4 lanes (there are too few YMM
// registers to hold them all), and the 8 buckets and weights of an iteration
// on their way to the staging buffers.
#define W2_NATS 0
#define W2_SIXTH 32
#define W2_HALF 64
#define W2_ONE 96
#define W2_NEGSCALE 128
#define W2_UNIT 160
#define W2_TWO52 192
#define W2_LOW8 224
#define W2_UNBIAS 256
#define W2_OVERFLOW 288
#define W2_B 320
#define W2_Q 352

// W2_HALFSTEP weighs the 4 tokens at byte offset off of (SI)(BX*4) into the
// lane sums zacc and sxacc and leaves their buckets at W2_B+boff(SP) and
// weights at W2_Q+qoff(SP). Y7-Y11 hold max, invT, floor, stepsPerNat and
// roundMagic.
#define W2_HALFSTEP(off, zacc, sxacc, boff, qoff) \
	VCVTPS2PD off(SI)(BX*4), Y0; \
	VSUBPD Y7, Y0, Y0; \
	VMULPD Y8, Y0, Y0; \
	VMAXPD Y9, Y0, Y0; \
	VMULPD Y10, Y0, Y1; \
	VADDPD Y11, Y1, Y1; \
	VSUBPD Y11, Y1, Y2; \
	VMULPD W2_NATS(SP), Y2, Y2; \
	VSUBPD Y2, Y0, Y2; \
	VMULPD W2_SIXTH(SP), Y2, Y3; \
	VADDPD W2_HALF(SP), Y3, Y3; \
	VMULPD Y2, Y3, Y3; \
	VADDPD W2_ONE(SP), Y3, Y3; \
	VMULPD Y2, Y3, Y3; \
	VADDPD W2_ONE(SP), Y3, Y3; \
	VPAND W2_LOW8(SP), Y1, Y4; \
	VPCMPEQQ Y5, Y5, Y5; \
	VGATHERQPD Y5, (R11)(Y4*8), Y6; \
	VPSRLQ $8, Y1, Y4; \
	VPADDQ W2_UNBIAS(SP), Y4, Y4; \
	VPSLLQ $52, Y4, Y4; \
	VPADDQ Y4, Y6, Y6; \
	VMULPD Y3, Y6, Y6; \
	VADDPD Y6, zacc, zacc; \
	VMULPD Y6, Y0, Y4; \
	VADDPD Y4, sxacc, sxacc; \
	VMULPD W2_NEGSCALE(SP), Y0, Y4; \
	VCVTTPD2DQY Y4, X4; \
	VPMINSD W2_OVERFLOW(SP), X4, X4; \
	VMOVDQU X4, W2_B+boff(SP); \
	VMULPD W2_UNIT(SP), Y6, Y5; \
	VADDPD W2_HALF(SP), Y5, Y5; \
	VROUNDPD $3, Y5, Y5; \
	VADDPD W2_TWO52(SP), Y5, Y5; \
	VPSUBQ W2_TWO52(SP), Y5, Y5; \
	VMOVDQU Y5, W2_Q+qoff(SP)

// W2_STAGE stores token k's bucket and weight at the staging position R13
// and advances R13 if the bucket is regular (below overflowBucket).
#define W2_STAGE(k) \
	MOVL W2_B+4*k(SP), AX; \
	MOVQ W2_Q+8*k(SP), DX; \
	MOVL AX, (R9)(R13*4); \
	MOVQ DX, (R10)(R13*8); \
	CMPL AX, $const_overflowBucket; \
	ADCQ $0, R13

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

// func maxAVX2(xs []float32, vals *[16]float32, ids *[16]int32) (ok bool)
TEXT ·maxAVX2(SB), NOSPLIT, $0-41
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	MOVQ vals+24(FP), DI
	MOVQ ids+32(FP), R8
	MOVL $0xff800000, AX
	MOVD AX, X0
	VPBROADCASTD X0, Y0        // lane maxima 0-7, from -Inf
	VMOVDQU Y0, Y1             // lane maxima 8-15
	MOVL $0x7f800000, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7        // +Inf
	VPXOR Y2, Y2, Y2           // ids of the lane maxima 0-7
	VPXOR Y3, Y3, Y3           // and 8-15
	VMOVDQU iota16<>+0(SB), Y4 // ids of the current vectors
	VMOVDQU iota16<>+32(SB), Y5
	MOVL $16, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	VPXOR Y8, Y8, Y8           // lanes that saw NaN or +Inf
	XORQ BX, BX

max2loop:
	VMOVUPS (SI)(BX*4), Y9
	VMOVUPS 32(SI)(BX*4), Y10
	VCMPPS $0x05, Y7, Y9, Y11  // !(x < +Inf): NaN or +Inf
	VORPS Y11, Y8, Y8
	VCMPPS $0x05, Y7, Y10, Y11
	VORPS Y11, Y8, Y8
	VCMPPS $0x1e, Y0, Y9, Y11  // x > lane maximum (false for NaN)
	VBLENDVPS Y11, Y9, Y0, Y0
	VBLENDVPS Y11, Y4, Y2, Y2
	VCMPPS $0x1e, Y1, Y10, Y11
	VBLENDVPS Y11, Y10, Y1, Y1
	VBLENDVPS Y11, Y5, Y3, Y3
	VPADDD Y6, Y4, Y4
	VPADDD Y6, Y5, Y5
	ADDQ $16, BX
	CMPQ BX, CX
	JB max2loop

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVDQU Y2, (R8)
	VMOVDQU Y3, 32(R8)
	VMOVMSKPS Y8, AX
	TESTL AX, AX
	SETEQ ok+40(FP)
	VZEROUPPER
	RET

// func minAtLeastAVX2(xs []float32, thr float32) float32
TEXT ·minAtLeastAVX2(SB), NOSPLIT, $0-36
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	VBROADCASTSS thr+24(FP), Y1
	MOVL $0x7f800000, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7        // +Inf
	VMOVUPS Y7, Y0             // lane minima, two sets
	VMOVUPS Y7, Y5
	XORQ BX, BX

min2loop:
	VMOVUPS (SI)(BX*4), Y2
	VCMPPS $0x1d, Y1, Y2, Y3   // x >= thr
	VBLENDVPS Y3, Y2, Y7, Y4
	VMINPS Y4, Y0, Y0
	VMOVUPS 32(SI)(BX*4), Y2
	VCMPPS $0x1d, Y1, Y2, Y3
	VBLENDVPS Y3, Y2, Y7, Y4
	VMINPS Y4, Y5, Y5
	ADDQ $16, BX
	CMPQ BX, CX
	JB min2loop

	VMINPS Y5, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMINPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMINPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VMINSS X1, X0, X0
	MOVSS X0, ret+32(FP)
	VZEROUPPER
	RET

// func weighAVX2(f *weighFrame, xs []float32, bk []uint16, stB []int32, stQ []uint64) (staged int)
//
// Eight tokens per iteration in two halves: tokens 0-3 add into lanes 0-3
// (Y15, Y13), tokens 4-7 into lanes 4-7 (Y14, Y12), as in weighTokens.
TEXT ·weighAVX2(SB), NOSPLIT, $416-112
	MOVQ f+0(FP), DI
	MOVQ xs_base+8(FP), SI
	MOVQ xs_len+16(FP), CX
	MOVQ bk_base+32(FP), R8
	MOVQ stB_base+56(FP), R9
	MOVQ stQ_base+80(FP), R10
	LEAQ ·expTable(SB), R11

	VBROADCASTSD ·expConsts+expConstants_natsPerStep(SB), Y0
	VMOVUPD Y0, W2_NATS(SP)
	VBROADCASTSD ·expConsts+expConstants_sixth(SB), Y0
	VMOVUPD Y0, W2_SIXTH(SP)
	VBROADCASTSD ·expConsts+expConstants_half(SB), Y0
	VMOVUPD Y0, W2_HALF(SP)
	VBROADCASTSD ·expConsts+expConstants_one(SB), Y0
	VMOVUPD Y0, W2_ONE(SP)
	VBROADCASTSD weighFrame_scale(DI), Y0
	VXORPD Y1, Y1, Y1
	VSUBPD Y0, Y1, Y0          // -scale: y*-scale rounds like -y*scale
	VMOVUPD Y0, W2_NEGSCALE(SP)
	VBROADCASTSD ·expConsts+expConstants_unit(SB), Y0
	VMOVUPD Y0, W2_UNIT(SP)
	VBROADCASTSD ·expConsts+expConstants_two52(SB), Y0
	VMOVUPD Y0, W2_TWO52(SP)
	VBROADCASTSD ·expConsts+expConstants_low8(SB), Y0
	VMOVUPD Y0, W2_LOW8(SP)
	VBROADCASTSD ·expConsts+expConstants_unbias(SB), Y0
	VMOVUPD Y0, W2_UNBIAS(SP)
	VBROADCASTSS ·expConsts+expConstants_overflow(SB), X0
	VMOVDQU X0, W2_OVERFLOW(SP)
	VBROADCASTSD weighFrame_max(DI), Y7
	VBROADCASTSD weighFrame_invT(DI), Y8
	VBROADCASTSD ·expConsts+expConstants_floor(SB), Y9
	VBROADCASTSD ·expConsts+expConstants_stepsPerNat(SB), Y10
	VBROADCASTSD ·expConsts+expConstants_roundMagic(SB), Y11
	VMOVUPD weighFrame_z(DI), Y15
	VMOVUPD weighFrame_z+32(DI), Y14
	VMOVUPD weighFrame_sx(DI), Y13
	VMOVUPD weighFrame_sx+32(DI), Y12
	XORQ R13, R13
	XORQ BX, BX

weigh2loop:
	W2_HALFSTEP(0, Y15, Y13, 0, 0)
	W2_HALFSTEP(16, Y14, Y12, 16, 32)
	// the 8 buckets as uint16 (they are at most overflowBucket)
	VMOVDQU W2_B(SP), X0
	VPACKUSDW W2_B+16(SP), X0, X0
	VMOVDQU X0, (R8)(BX*2)
	W2_STAGE(0)
	W2_STAGE(1)
	W2_STAGE(2)
	W2_STAGE(3)
	W2_STAGE(4)
	W2_STAGE(5)
	W2_STAGE(6)
	W2_STAGE(7)
	ADDQ $8, BX
	CMPQ BX, CX
	JB weigh2loop

	VMOVUPD Y15, weighFrame_z(DI)
	VMOVUPD Y14, weighFrame_z+32(DI)
	VMOVUPD Y13, weighFrame_sx(DI)
	VMOVUPD Y12, weighFrame_sx+32(DI)
	MOVQ R13, staged+104(FP)
	VZEROUPPER
	RET

// func matchAVX2(bk []uint16, b uint16, out []int32) (i, n int)
TEXT ·matchAVX2(SB), NOSPLIT, $0-72
	MOVQ bk_base+0(FP), SI
	MOVQ bk_len+8(FP), CX
	MOVWLZX b+24(FP), AX
	MOVD AX, X0
	VPBROADCASTW X0, Y0
	MOVQ out_base+32(FP), DI
	MOVQ out_len+40(FP), R8
	XORQ BX, BX
	XORQ DX, DX
	TESTQ R8, R8
	JZ match2done

match2loop:
	CMPQ BX, CX
	JAE match2done
	VPCMPEQW (SI)(BX*2), Y0, Y1
	VPCMPEQW 32(SI)(BX*2), Y0, Y2
	VPACKSSWB Y2, Y1, Y1       // bytes per 128-bit lane: words 0-7, 16-23, 8-15, 24-31
	VPERMQ $0xd8, Y1, Y1       // words 0-31 in order
	VPMOVMSKB Y1, AX
	TESTL AX, AX
	JZ match2next

match2hit:
	TZCNTL AX, R9
	ADDQ BX, R9
	MOVL R9, (DI)(DX*4)
	INCQ DX
	CMPQ DX, R8
	JAE match2full
	BLSRL AX, AX
	JNZ match2hit

match2next:
	ADDQ $32, BX
	JMP match2loop

match2full:
	ADDQ $32, BX

match2done:
	MOVQ BX, i+56(FP)
	MOVQ DX, n+64(FP)
	VZEROUPPER
	RET
