package arch

// Mistral is the architecture's name.
const Mistral = "mistral"

// Mistral 7B v0.2 and later: Llama's layers without rope scaling, which llama.cpp and the
// plugin run as llama; a SentencePiece tokenizer and [INST] turns. v0.1's 4096-token
// sliding window is not run (llama.cpp's llama graph has none either); later versions have
// no window. The tiny tokenizer adds no space prefix, as Gemma's.
func init() {
	register(Desc{
		Name: Mistral, GGUF: Llama, HFClass: "MistralForCausalLM", Chat: mistralChat, Tokenizer: mistralTokenizer, Order: 4,
		PermuteQK: true, ConfigHeadDim: true, GGUFRopeDims: true, Activation: "silu",
		Tiny: tinyBase.with(func(d *Dims) { d.RMSEps, d.TiedEmbeddings = 1e-5, false }),
	})
}

// mistralChat is Mistral's v0.3 format: [INST] user [/INST], the reply after a space and
// closed by EOS, and no generation prompt. The system message opens the first user turn
// (Mistral's template puts it in the last: the same for one user turn).
var mistralChat = Chat{
	Family:  "mistral",
	Markers: []string{"[INST]", "[/INST]"},
	Begin:   "<s>",
	Turns: map[string]Turn{
		"user":      {"[INST] ", "[/INST]"},
		"assistant": {" ", "</s>"},
	},
	SystemSep: "\n\n",
	Jinja: "{{- bos_token }}{%- if messages[0].role == 'system' %}{%- set prefix = messages[0].content + '\\n\\n' %}" +
		"{%- set messages = messages[1:] %}{%- else %}{%- set prefix = '' %}{%- endif %}" +
		"{%- for message in messages %}{%- set content = (prefix if loop.first else '') + message.content %}" +
		"{%- if message.role == 'user' %}{{- '[INST] ' + content + '[/INST]' }}{%- else %}{{- ' ' + content + eos_token }}{%- endif %}{%- endfor %}",
}

var mistralTokenizer = Tokenizer{
	Name: "mistral", Pre: "default", SPM: true, AddBOS: true,
	BOS: "<s>", EOS: "</s>", PAD: "</s>", Unk: "<unk>",
	Specials: []Special{
		{"<unk>", Unknown},
		{"<s>", Control},
		{"</s>", Control},
		{"[INST]", Control},
		{"[/INST]", Control},
	},
}
