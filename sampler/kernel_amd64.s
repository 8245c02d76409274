//go:build amd64 && !purego

#include "textflag.h"
#include "go_asm.h"

// weighAVX2's frame: constants broadcast to 4 lanes (there are too few YMM
// registers to hold them all), and the 8 buckets and weights of an iteration
// on their way to the histogram (W2_HIST).
#define W2_NATS 0
#define W2_SIXTH 32
#define W2_HALF 64
#define W2_ONE 96
#define W2_NEGSCALE 128
#define W2_UNIT 160
#define W2_TWO52 192
#define W2_STEPMASK 224
#define W2_UNBIAS 256
#define W2_OVERFLOW 288
#define W2_B 320
#define W2_Q 352
#define W2_C24 416
#define W2_C120 448

// W2_HALFSTEP weighs the 4 tokens at byte offset off of (SI)(BX*4) into the
// lane sums zacc and sxacc and leaves their buckets at W2_B+boff(SP) and
// weights at W2_Q+qoff(SP). Y7-Y11 hold max, invT, floor, stepsPerNat and
// roundMagic.
#define W2_HALFSTEP(off, zacc, sxacc, boff, qoff) \
	VCVTPS2PD off(SI)(BX*4), Y0; \
	VSUBPD Y7, Y0, Y0; \
	VMULPD Y8, Y0, Y0; \
	VMAXPD Y9, Y0, Y0; \
	VMOVAPD Y11, Y1; \
	VFMADD231PD Y10, Y0, Y1; \
	VSUBPD Y11, Y1, Y3; \
	VMOVAPD Y0, Y2; \
	VFNMADD231PD W2_NATS(SP), Y3, Y2; \
	VMOVUPD W2_C24(SP), Y3; \
	VFMADD231PD W2_C120(SP), Y2, Y3; \
	VFMADD213PD W2_SIXTH(SP), Y2, Y3; \
	VFMADD213PD W2_HALF(SP), Y2, Y3; \
	VFMADD213PD W2_ONE(SP), Y2, Y3; \
	VFMADD213PD W2_ONE(SP), Y2, Y3; \
	VPAND W2_STEPMASK(SP), Y1, Y4; \
	VPCMPEQQ Y5, Y5, Y5; \
	VGATHERQPD Y5, (R11)(Y4*8), Y6; \
	VPSRLQ $const_expStepShift, Y1, Y4; \
	VPADDQ W2_UNBIAS(SP), Y4, Y4; \
	VPSLLQ $52, Y4, Y4; \
	VPADDQ Y4, Y6, Y6; \
	VMULPD Y3, Y6, Y6; \
	VADDPD Y6, zacc, zacc; \
	VFMADD231PD Y6, Y0, sxacc; \
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

// W2_HIST adds token k of the iteration into the histogram: into its
// bucket, or into the spare slot of lane k if that is the overflow bucket.
#define W2_HIST(k) \
	MOVL W2_B+4*k(SP), AX; \
	MOVQ W2_Q+8*k(SP), DX; \
	MOVL $(const_overflowBucket+k), R13; \
	CMPL AX, $const_overflowBucket; \
	CMOVLCC R13, AX; \
	INCL (R9)(AX*4); \
	ADDQ DX, (R10)(AX*8)

// func maxAVX512(xs []float32) (m float32, ok bool)
//
// Four independent accumulators: a compare-and-blend chain per vector would
// make the pass latency-bound.
TEXT ·maxAVX512(SB), NOSPLIT, $0-29
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0        // maxima, from -Inf
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	KXORW K2, K2, K2           // lanes that saw NaN
	XORQ BX, BX

maxloop:
	VMOVUPS (SI)(BX*4), Z4
	VMOVUPS 64(SI)(BX*4), Z5
	VMOVUPS 128(SI)(BX*4), Z6
	VMOVUPS 192(SI)(BX*4), Z7
	VCMPPS $0x03, Z4, Z4, K1   // unordered: NaN
	KORW K1, K2, K2
	VCMPPS $0x03, Z5, Z5, K1
	KORW K1, K2, K2
	VCMPPS $0x03, Z6, Z6, K1
	KORW K1, K2, K2
	VCMPPS $0x03, Z7, Z7, K1
	KORW K1, K2, K2
	VMAXPS Z4, Z0, Z0
	VMAXPS Z5, Z1, Z1
	VMAXPS Z6, Z2, Z2
	VMAXPS Z7, Z3, Z3
	ADDQ $64, BX
	CMPQ BX, CX
	JB maxloop

	VMAXPS Z1, Z0, Z0
	VMAXPS Z3, Z2, Z2
	VMAXPS Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VMAXSS X1, X0, X0
	MOVSS X0, m+24(FP)
	KORTESTW K2, K2
	SETEQ ok+28(FP)
	VZEROUPPER
	RET

// func indexAVX512(xs []float32, v float32) int
TEXT ·indexAVX512(SB), NOSPLIT, $0-40
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	VBROADCASTSS v+24(FP), Z0
	XORQ BX, BX

indexloop:
	CMPQ BX, CX
	JAE indexdone
	VCMPPS $0x00, (SI)(BX*4), Z0, K1
	KMOVW K1, AX
	TESTL AX, AX
	JNZ indexfound
	ADDQ $16, BX
	JMP indexloop

indexfound:
	TZCNTL AX, AX
	ADDQ AX, BX

indexdone:
	MOVQ BX, ret+32(FP)
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
// weighTokens in the same order, fused where it fuses them.
TEXT ·weighAVX512(SB), NOSPLIT, $0-112
	MOVQ f+0(FP), DI
	MOVQ xs_base+8(FP), SI
	MOVQ xs_len+16(FP), CX
	MOVQ bk_base+32(FP), R8
	MOVQ stB_base+56(FP), R9
	MOVQ stQ_base+80(FP), R10

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
	VBROADCASTSD ·expConsts+expConstants_c24(SB), Z27
	VBROADCASTSD ·expConsts+expConstants_c120(SB), Z30
	VMOVUPD ·expTable(SB), Z12 // entries 0-7
	VMOVUPD ·expTable+64(SB), Z13 // entries 8-15
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
	// expNeg, fused as in Go: t = fma(y, stepsPerNat, magic);
	// r = fma(-(t - magic), natsPerStep, y)
	VMOVAPD Z20, Z1
	VFMADD231PD Z19, Z0, Z1
	VSUBPD Z20, Z1, Z2
	VFNMADD213PD Z0, Z21, Z2
	// p = fma(fma(fma(fma(fma(r, 1/120, 1/24), r, 1/6), r, 1/2), r, 1), r, 1)
	VMOVAPD Z27, Z3
	VFMADD231PD Z30, Z2, Z3
	VFMADD213PD Z22, Z2, Z3
	VFMADD213PD Z23, Z2, Z3
	VFMADD213PD Z24, Z2, Z3
	VFMADD213PD Z24, Z2, Z3
	// e = bits(expTable[k&15] + (k>>4 + unbias)<<52) * p; the permute reads
	// only the low 4 bits of each index
	VMOVAPD Z12, Z5
	VPERMT2PD Z13, Z1, Z5
	VPSRLQ $const_expStepShift, Z1, Z6
	VPADDQ Z28, Z6, Z6
	VPSLLQ $52, Z6, Z6
	VPADDQ Z6, Z5, Z5
	VMULPD Z3, Z5, Z5
	// z += e; sx = fma(y, e, sx)
	VADDPD Z5, Z14, Z14
	VFMADD231PD Z5, Z0, Z15
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

// func maxAVX2(xs []float32) (m float32, ok bool)
TEXT ·maxAVX2(SB), NOSPLIT, $0-29
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	MOVL $0xff800000, AX
	MOVD AX, X0
	VPBROADCASTD X0, Y0        // maxima, from -Inf
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VXORPS Y8, Y8, Y8          // lanes that saw NaN
	XORQ BX, BX

max2loop:
	VMOVUPS (SI)(BX*4), Y4
	VMOVUPS 32(SI)(BX*4), Y5
	VMOVUPS 64(SI)(BX*4), Y6
	VMOVUPS 96(SI)(BX*4), Y7
	VCMPPS $0x03, Y4, Y4, Y9   // unordered: NaN
	VORPS Y9, Y8, Y8
	VCMPPS $0x03, Y5, Y5, Y9
	VORPS Y9, Y8, Y8
	VCMPPS $0x03, Y6, Y6, Y9
	VORPS Y9, Y8, Y8
	VCMPPS $0x03, Y7, Y7, Y9
	VORPS Y9, Y8, Y8
	VMAXPS Y4, Y0, Y0
	VMAXPS Y5, Y1, Y1
	VMAXPS Y6, Y2, Y2
	VMAXPS Y7, Y3, Y3
	ADDQ $32, BX
	CMPQ BX, CX
	JB max2loop

	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VPSHUFD $1, X0, X1
	VMAXSS X1, X0, X0
	MOVSS X0, m+24(FP)
	VMOVMSKPS Y8, AX
	TESTL AX, AX
	SETEQ ok+28(FP)
	VZEROUPPER
	RET

// func indexAVX2(xs []float32, v float32) int
TEXT ·indexAVX2(SB), NOSPLIT, $0-40
	MOVQ xs_base+0(FP), SI
	MOVQ xs_len+8(FP), CX
	VBROADCASTSS v+24(FP), Y0
	XORQ BX, BX

index2loop:
	CMPQ BX, CX
	JAE index2done
	VCMPPS $0x00, (SI)(BX*4), Y0, Y1
	VMOVMSKPS Y1, AX
	TESTL AX, AX
	JNZ index2found
	ADDQ $8, BX
	JMP index2loop

index2found:
	TZCNTL AX, AX
	ADDQ AX, BX

index2done:
	MOVQ BX, ret+32(FP)
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

// func weighAVX2(f *weighFrame, xs []float32, bk []uint16)
//
// Eight tokens per iteration in two halves: tokens 0-3 add into lanes 0-3
// (Y15, Y13), tokens 4-7 into lanes 4-7 (Y14, Y12), as in weighTokens.
TEXT ·weighAVX2(SB), NOSPLIT, $480-56
	MOVQ f+0(FP), DI
	MOVQ xs_base+8(FP), SI
	MOVQ xs_len+16(FP), CX
	MOVQ bk_base+32(FP), R8
	MOVQ weighFrame_cnt(DI), R9
	MOVQ weighFrame_mass(DI), R10
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
	VBROADCASTSD ·expConsts+expConstants_stepMask(SB), Y0
	VMOVUPD Y0, W2_STEPMASK(SP)
	VBROADCASTSD ·expConsts+expConstants_c24(SB), Y0
	VMOVUPD Y0, W2_C24(SP)
	VBROADCASTSD ·expConsts+expConstants_c120(SB), Y0
	VMOVUPD Y0, W2_C120(SP)
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
	XORQ BX, BX

weigh2loop:
	W2_HALFSTEP(0, Y15, Y13, 0, 0)
	W2_HALFSTEP(16, Y14, Y12, 16, 32)
	// the 8 buckets as uint16 (they are at most overflowBucket)
	VMOVDQU W2_B(SP), X0
	VPACKUSDW W2_B+16(SP), X0, X0
	VMOVDQU X0, (R8)(BX*2)
	W2_HIST(0)
	W2_HIST(1)
	W2_HIST(2)
	W2_HIST(3)
	W2_HIST(4)
	W2_HIST(5)
	W2_HIST(6)
	W2_HIST(7)
	ADDQ $8, BX
	CMPQ BX, CX
	JB weigh2loop

	VMOVUPD Y15, weighFrame_z(DI)
	VMOVUPD Y14, weighFrame_z+32(DI)
	VMOVUPD Y13, weighFrame_sx(DI)
	VMOVUPD Y12, weighFrame_sx+32(DI)
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
