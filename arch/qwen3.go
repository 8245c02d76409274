package arch

// Qwen3: QK-norm, no biases, head dim independent of hidden/heads; ChatML without a default
// system prompt, and hybrid-thinking templates (Qwen3-4B) that turn thinking off with an
// empty think block.
func init() {
	register(Desc{
		Name: Qwen3, HFClass: "Qwen3ForCausalLM", Chat: qwen3Chat, Tokenizer: qwen2Tokenizer, Order: 1,
		QKNorm: true, ConfigHeadDim: true, Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) { d.HeadDim = 32 }),
		Presets: map[string]Dims{
			// Qwen3-4B: heads x head dim (4096) wider than hidden.
			"qwen3-4b": {Vocab: 151936, Hidden: 2560, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128,
				FFN: 9728, RopeTheta: 1e6, RMSEps: 1e-6, Context: 40960, TiedEmbeddings: true},
		},
	})
}

var qwen3Chat = Chat{
	Family:      "qwen3",
	Markers:     []string{"<|im_start|>", "<|im_end|>"},
	Thinking:    "enable_thinking",
	ThinkingOff: "<think>\n\n</think>\n\n",
	Turns:       chatml,
	Prompt:      "<|im_start|>assistant\n",
	Jinja: "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}" +
		chatmlLoop,
}
