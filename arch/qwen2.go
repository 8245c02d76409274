package arch

// Qwen2 and Qwen2.5: q/k/v biases and tied embeddings; ChatML with a default system prompt.
func init() {
	register(Desc{
		Name: Qwen2, HFClass: "Qwen2ForCausalLM", Chat: qwen25Chat, Tokenizer: qwen2Tokenizer, Order: 0,
		QKVBias: true, HeadsSpanHidden: true, Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) { d.QKVBias = true }),
		Presets: map[string]Dims{
			"qwen2.5-0.5b": {Vocab: 151936, Hidden: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
				FFN: 4864, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
			"qwen2.5-3b": {Vocab: 151936, Hidden: 2048, Layers: 36, Heads: 16, KVHeads: 2, HeadDim: 128,
				FFN: 11008, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, QKVBias: true},
		},
	})
}

// qwenDefaultSystem is Qwen2.5's system prompt when none is given.
const qwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// qwen25Chat is ChatML with Qwen2.5's default system prompt, by which its templates are
// told from Qwen3's.
var qwen25Chat = Chat{
	Family:        "qwen2.5",
	Markers:       []string{"<|im_start|>", qwenDefaultSystem},
	Turns:         chatml,
	DefaultSystem: qwenDefaultSystem,
	Prompt:        "<|im_start|>assistant\n",
	Jinja: "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}" +
		"{%- else %}{{- '<|im_start|>system\\n" + qwenDefaultSystem + "<|im_end|>\\n' }}{%- endif %}" + chatmlLoop,
}

// qwen2Tokenizer is Qwen2's, Qwen2.5's and Qwen3's byte-level BPE.
var qwen2Tokenizer = Tokenizer{
	Name: "qwen2", Pre: "qwen2",
	Split: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	BOS:   "<|endoftext|>", EOS: "<|im_end|>", PAD: "<|endoftext|>",
	Specials: []Special{
		{"<|endoftext|>", Control},
		{"<|im_start|>", Control},
		{"<|im_end|>", Control},
		{"<think>", UserDefined},
		{"</think>", UserDefined},
	},
}
