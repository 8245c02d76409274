package arch

// Gemma 3 (text): sandwich norms with the +1 offset, GeLU-tanh, embeddings scaled by
// sqrt(hidden), QK-norm, five sliding-window layers to one global, each kind with its rope
// base, and a SentencePiece tokenizer. The tiny shape has six layers so that both kinds
// run, and a window shorter than test prompts.
func init() {
	register(Desc{
		Name: Gemma3, ModelType: "gemma3_text", HFClass: "Gemma3ForCausalLM", Chat: gemma3Chat, Tokenizer: gemmaTokenizer, Order: 3,
		QKNorm: true, ConfigHeadDim: true, TiedByDefault: true, Activation: "gelu_pytorch_tanh", NormOffset: 1,
		SandwichNorm: true, EmbedScale: true, SlidingWindowPattern: 6, LocalRopeTheta: 10000, QueryPreAttnDefault: 256,
		Tiny: tinyBase.with(func(d *Dims) { d.Layers, d.KVHeads, d.HeadDim, d.SlidingWindow = 6, 1, 32, 8 }),
		Presets: map[string]Dims{
			"gemma-3-1b": {Vocab: 262144, Hidden: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256,
				FFN: 6912, RopeTheta: 1e6, RMSEps: 1e-6, Context: 32768, TiedEmbeddings: true, SlidingWindow: 512},
		},
	})
}

// gemma3Chat is Gemma's turns (<start_of_turn>user / model); a system message has no turn
// of its own and opens the first user turn, followed by a blank line.
var gemma3Chat = Chat{
	Family:  "gemma3",
	Markers: []string{"<start_of_turn>", "<end_of_turn>"},
	Begin:   "<bos>",
	Turns: map[string]Turn{
		"user":      {"<start_of_turn>user\n", "<end_of_turn>\n"},
		"assistant": {"<start_of_turn>model\n", "<end_of_turn>\n"},
	},
	SystemSep: "\n\n",
	Trim:      true,
	Prompt:    "<start_of_turn>model\n",
	Jinja: "{{- bos_token }}{%- if messages[0].role == 'system' %}{%- set prefix = messages[0].content | trim + '\\n\\n' %}" +
		"{%- set messages = messages[1:] %}{%- else %}{%- set prefix = '' %}{%- endif %}" +
		"{%- for message in messages %}{%- set role = 'model' if message.role == 'assistant' else message.role %}" +
		"{{- '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message.content | trim + '<end_of_turn>\\n' }}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}",
}

// gemmaTokenizer is Gemma's SentencePiece style, its specials at ids 0-5 as in its
// tokenizer; its chat's end of turn is the generated models' EOS.
var gemmaTokenizer = Tokenizer{
	Name: "gemma", Pre: "default", SPM: true, AddBOS: true,
	BOS: "<bos>", EOS: "<end_of_turn>", PAD: "<pad>", Unk: "<unk>",
	Specials: []Special{
		{"<pad>", Control},
		{"<eos>", Control},
		{"<bos>", Control},
		{"<unk>", Unknown},
		{"<start_of_turn>", Control},
		{"<end_of_turn>", Control},
	},
}
