package trainspec

// The plugin's memory constants (kernels/), which memplan counts with;
// cgo/torch's TestMemoryConstantsMatchKernel checks those the kernels define against
// their source.
const (
	// ChunkLogits is about how many logits one lm_head chunk holds when the chunk is left
	// to the plugin (pick_chunk): rows = ChunkLogits / vocabulary.
	ChunkLogits = 1 << 24
	// KeptLogits is the most log-softmax values a training forward keeps for its backward
	// (kKeptLogits); more are recomputed chunk by chunk.
	KeptLogits = 1 << 26
	// OffloadChunk is how many values of a parameter an offloaded optimizer step (--offload
	// optimizer) moves to the host and back at a time (kOffloadChunk, kernels/umad_internal.h).
	OffloadChunk = 64 << 18
	// BucketBytes is the size of the buckets the gradients and sharded weights travel in
	// between ranks (DDP's default), which the trainer passes to the plugin's collectives.
	BucketBytes = 25 << 20
)
