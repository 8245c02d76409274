package arch

// Llama 3: untied output, Llama 3 rope scaling, q/k rows permuted in the GGUF; Llama 3's
// chat headers, whose system turn always carries the dated preamble.
func init() {
	register(Desc{
		Name: Llama, HFClass: "LlamaForCausalLM", Chat: llama3Chat, Tokenizer: llamaBPETokenizer, Order: 2,
		PermuteQK: true, ConfigHeadDim: true, GGUFRopeDims: true, RopeScaling: "llama3", Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) {
			d.RopeTheta, d.RMSEps, d.TiedEmbeddings = 500000, 1e-5, false
			d.RopeScaling = &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4,
				OriginalMaxPositionEmbeddings: 8192}
		}),
	})
}

var llama3Chat = Chat{
	Family:  "llama3",
	Markers: []string{"<|start_header_id|>", "<|eot_id|>"},
	Begin:   "<|begin_of_text|>",
	Turns: map[string]Turn{
		"system":    {"<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>"},
		"user":      {"<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>"},
		"assistant": {"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
	},
	Trim:           true,
	SystemPreamble: "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n",
	DefaultDate:    "26 Jul 2024", // fixed, for reproducibility
	Prompt:         "<|start_header_id|>assistant<|end_header_id|>\n\n",
	Jinja: "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}" +
		"{%- if messages[0].role == 'system' %}{%- set system_message = messages[0].content | trim %}{%- set messages = messages[1:] %}" +
		"{%- else %}{%- set system_message = '' %}{%- endif %}" +
		"{{- '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\nToday Date: ' + date_string + '\\n\\n' + system_message + '<|eot_id|>' }}" +
		"{%- for message in messages %}{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
}

// llamaBPETokenizer is Llama 3's byte-level BPE: numbers cut into groups of three, BOS
// added.
var llamaBPETokenizer = Tokenizer{
	Name: "llama-bpe", Pre: "llama-bpe",
	Split:  `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	AddBOS: true, IgnoreMerges: true, CleanSpaces: true,
	BOS: "<|begin_of_text|>", EOS: "<|eot_id|>", PAD: "<|end_of_text|>",
	Specials: []Special{
		{"<|begin_of_text|>", Control},
		{"<|end_of_text|>", Control},
		{"<|start_header_id|>", Control},
		{"<|end_header_id|>", Control},
		{"<|eot_id|>", Control},
	},
}
