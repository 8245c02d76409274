package memplan

// The trainer's memory: what the plugin (kernels/) and the trainer package allocate.

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/trainspec"
)

func (a Agent) lora() bool { return a.LoRA.Rank > 0 }

func (a Agent) targets() []string {
	if len(a.LoRA.Targets) == 0 {
		return trainspec.LoRATargets
	}
	return a.LoRA.Targets
}

// projection is a projection's input and output widths (a target checked by New).
func (a Agent) projection(name string) (in, out int64) {
	i, o, _ := peft.LoRATargetDims(a.Shape, trainspec.LoRAModule(name))
	return int64(i), int64(o)
}

// trainable is the trained parameter count and the largest trained tensor's.
func (a Agent) trainable() (n, largest int64) {
	if a.lora() {
		r := int64(a.LoRA.Rank)
		for _, t := range a.targets() {
			in, out := a.projection(t)
			n += r * (in + out) * int64(a.Shape.Layers)
			largest = max(largest, r*max(in, out))
		}
		return n, largest
	}
	for _, t := range a.Shape.Tensors() {
		n += t.Elems()
		largest = max(largest, t.Elems())
	}
	return n, largest
}

// shards is what a ZeRO stage divides a part of the training state by: the ranks sharing it
// when the agent's stage is at least from, else 1 (replicated).
func (a Agent) shards(from int) int64 {
	if a.Shard >= from && a.ShardRanks > 1 {
		return int64(a.ShardRanks)
	}
	return 1
}

// part names the share of a sharded line.
func part(d int64) string {
	if d == 1 {
		return ""
	}
	return fmt.Sprintf(", 1/%d", d)
}

func (a Agent) trainerLines() []Line {
	P := a.Shape.Params()
	n, largest := a.trainable()
	var lines []Line
	add := func(device bool, bytes int64, name string, phases ...string) {
		lines = append(lines, Line{Name: name, Bytes: bytes, Phases: phases, Device: device})
	}
	// The sync and the checkpoints read the trained tensors into Go as f32: the sync the
	// weights, a checkpoint the weights and then both moments, all held until written. A
	// rank that only serves the agent's rollouts receives its weights the same way.
	add(false, 4*n, "sync export (Go copy)", PhaseSync)
	if a.RolloutOnly {
		return lines
	}
	dev := a.Device.CUDA
	// Stage 3 shards the weights, the reference's too, and gathers them layer by layer.
	w := a.shards(3)
	if a.lora() {
		add(dev, P*computeBytes(a.baseDType())/w, fmt.Sprintf("base weights (%s, frozen%s)", a.baseDType(), part(w)))
		add(dev, 4*n/w, fmt.Sprintf("LoRA adapters (rank %d, f32%s)", a.LoRA.Rank, part(w)))
	} else if a.DType == BF16 {
		add(dev, 4*P/w, fmt.Sprintf("trainer weights (f32 masters, bf16 compute%s)", part(w)))
	} else {
		add(dev, 4*P/w, fmt.Sprintf("trainer weights (f32%s)", part(w)))
	}
	m := a.shards(1)
	if a.Offload {
		add(false, 8*n/m, fmt.Sprintf("AdamW moments (2 x f32%s, host)", part(m)))
	} else {
		add(dev, 8*n/m, fmt.Sprintf("AdamW moments (2 x f32%s)", part(m)))
	}
	// The moments of a sharded run are created (or read from a checkpoint) as this rank's
	// part; stage 3's weights are loaded whole, agent after agent, then each rank keeps its
	// part (rank 0's weights reach every rank).
	if w > 1 {
		add(dev, 4*P-4*P/w, "trainer weights, the rest until sharded", PhaseStart)
		if !a.lora() {
			ref := P * computeBytes(a.DType)
			add(dev, ref-ref/w, "reference model, the rest until sharded", PhaseStart)
		}
	}
	if !a.lora() {
		// A second model loaded from the starting weights, frozen, so in the compute dtype;
		// with LoRA the base is the reference.
		add(dev, P*computeBytes(a.DType)/w, fmt.Sprintf("reference model (%s%s)", cmp.Or(a.DType, F32), part(w)))
	}
	if w > 1 {
		// A pass holds the embedding, final norm and head whole, and the layer it is in.
		layer, rest := a.layerAndRest()
		add(dev, 4*(layer+rest), "gathered weights (stage 3: a layer, the embedding, norm and head)", PhaseTrain)
	}
	// Gradients accumulate into the f32 parameters (masters) at either dtype; stage 2 keeps
	// this rank's part of their sums, and a pass holds whole gradients until they are summed.
	if g := a.shards(2); g > 1 {
		add(dev, 4*n/g, fmt.Sprintf("gradients (1/%d of the sums)", g), PhaseTrain, PhaseStep)
		what := "a pass's all"
		if a.GradCheckpoint {
			what = "two layers', the embedding's and head's"
		}
		add(dev, a.gradsInFlight()+trainspec.BucketBytes, fmt.Sprintf("gradients on their way to the sum (%s, and a bucket)", what), PhaseTrain)
	} else {
		add(dev, 4*n, "gradients", PhaseTrain, PhaseStep)
	}
	ckpt := ""
	if a.GradCheckpoint {
		ckpt = ", checkpointed"
	}
	add(dev, a.activations(), fmt.Sprintf("activations (%d seqs x %d tokens%s)", a.MicroBatchSeqs, a.PromptTokens+a.ResponseTokens, ckpt), PhaseTrain)
	// AdamW's denominator of the largest tensor (a GPU takes it whole, the CPU in slices);
	// the gradient norm needs only one value per 1,024.
	if a.Offload {
		// The host's AdamW takes a chunk of a parameter's weights and gradient at a time.
		add(false, 2*4*min(trainspec.OffloadChunk, largest), "optimizer step (weights and gradient through the host, a chunk)", PhaseStep)
	} else {
		add(dev, 4*largest, "optimizer step (AdamW temporary)", PhaseStep)
	}
	if m > 1 && w == 1 {
		// The updated parameters' all-gather: this rank's bucket out, every rank's back (stage
		// 3 has none: its passes gather the parts).
		add(dev, 2*trainspec.BucketBytes, "parameter all-gather (buckets)", PhaseStep)
	}
	ck := 12 * n
	if m > 1 {
		ck += 8 * n // rank 0 gathers the moments into host tensors before they are written
	}
	add(false, ck, "checkpoint (Go copies)", PhaseCheckpoint)
	return lines
}

// gradsInFlight is what a stage 2 pass holds of whole gradients before their sum over the
// ranks (kernels/umad_zero.cpp, reduce_grads): with checkpointing, two layers' trained
// tensors (one being summed behind the next one's backward) and those outside the layers
// (the embedding and head, whose gradients the backward starts and ends with), else every
// trained tensor.
func (a Agent) gradsInFlight() int64 {
	n, _ := a.trainable()
	switch {
	case !a.GradCheckpoint:
		return 4 * n
	case a.lora(): // adapters live in the layers alone
		return 2 * 4 * n / int64(a.Shape.Layers)
	}
	layer, rest := a.layerAndRest()
	return 4 * (2*layer + rest)
}

// layerAndRest are the parameters of a layer and those outside the layers (the embedding,
// final norm and an untied head).
func (a Agent) layerAndRest() (layer, rest int64) {
	for _, t := range a.Shape.Tensors() {
		if strings.HasPrefix(t.Name, "model.layers.0.") {
			layer += t.Elems()
		} else if !strings.HasPrefix(t.Name, "model.layers.") {
			rest += t.Elems()
		}
	}
	return layer, rest
}

// baseDType is what a LoRA base is stored in: bf16 under bf16 compute (it is only ever used
// cast), else --lora-bf16-base's choice.
func (a Agent) baseDType() DType {
	if a.DType == BF16 || a.LoRA.BaseDType == BF16 {
		return BF16
	}
	return F32
}

// activations is the peak of one micro-batch's forward and backward: what every layer keeps
// for the backward (layer_forward in kernels/umad_forward.cpp, op by op), or with
// checkpointing the layer inputs plus one layer recomputed, then the chunked log-probs'
// head, the RoPE tables and the backward's working set.
func (a Agent) activations() int64 {
	s := a.Shape
	H, I, V, hd := int64(s.Hidden), int64(s.FFN), int64(s.Vocab), int64(s.HeadDim)
	nh := int64(s.Heads)
	q, kv := nh*hd, int64(s.KVHeads)*hd
	G, L := int64(a.MicroBatchSeqs), int64(a.PromptTokens+a.ResponseTokens)
	T, R := G*L, G*int64(a.ResponseTokens) // tokens packed, response rows scored
	e := int64(4)
	if a.DType == BF16 {
		e = 2 // bf16 compute
	}
	// Per token: the layer input, two RMS norms' normalised and scaled outputs and the
	// residual sum (6H); q's projection, rotate-half and RoPE output, the expanded k and v,
	// the attention output (6q); k's projection and rotate-half (2kv); the MLP's gate, SiLU,
	// up and product (4I).
	perToken := 6*H + 6*q + 2*kv + 4*I
	d, _ := arch.Lookup(string(s.Arch))
	if d.QKNorm {
		perToken += 2*q + 2*kv // QK-norm's normalised and scaled q and k
	}
	if d.SandwichNorm {
		perToken += 4 * H // the norms after attention and MLP: normalised and scaled outputs
	}
	if a.lora() {
		perToken += int64(a.LoRA.Rank * len(a.targets())) // each adapter's rank-r middle
	}
	var attn, attnWork int64
	if a.FusedAttention {
		perToken += q     // SDPA keeps its output besides the reshaped copy
		attn = T * nh * 4 // and the f32 log-sum-exp
	} else {
		attn = G * L * L * (4*nh + 1) // f32 softmax of every head and the causal mask
		attnWork = 2 * 4 * nh * L * L // scores and scaled scores while one is built
	}
	layer := T*perToken*e + attn
	kept := int64(s.Layers) * layer
	if a.GradCheckpoint {
		kept = int64(s.Layers)*T*H*e + layer
	}
	rope := 2 * T * hd * e
	// The final norm (input, normalised, scaled), the response rows and their gradient.
	head := 3*T*H*e + 2*R*H*e
	// Chunks of about 16M logits (the plugin's pick_chunk): z, log-softmax, probabilities,
	// their gradient and temporaries.
	rows := min(max(1, trainspec.ChunkLogits/V), max(R, 1))
	head += 6 * rows * V * 4
	// The forward's log-softmax, kept for the backward when at most KeptLogits values; more
	// are recomputed chunk by chunk.
	if R*V <= trainspec.KeptLogits {
		head += R * V * 4
	}
	// The lm_head gradient is built in f32 whole; a trained embedding adds its dense gradient.
	head += V * H * 4
	if !a.lora() {
		head += V * H * 4
	}
	work := attnWork + 4*T*max(I, q, H)*e
	copies := int64(0)
	if a.DType == BF16 && !a.lora() {
		// bf16 copies of the f32 masters that autograd keeps: every layer's, or one layer's
		// when checkpointed, and the lm_head's. A LoRA base is stored in bf16: no copies.
		perLayer := (s.Params() - V*H) / int64(s.Layers)
		copies = 2 * (V*H + perLayer)
		if !a.GradCheckpoint {
			copies = 2 * s.Params()
		}
	}
	return kept + rope + head + work + copies
}
