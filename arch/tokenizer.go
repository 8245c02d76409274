package arch

// Tokenizer is the tokenizer of the models umad generates for an architecture, as data:
// byte-level BPE cut by a pre-tokenizer, or SentencePiece style. Converted checkpoints
// bring their own vocabulary and special tokens; their family is recognised by Split (BPE)
// or by its end of turn among their added tokens (SentencePiece).
type Tokenizer struct {
	// Name names the tokenizer; architectures that share one share the name.
	Name string
	// Pre is llama.cpp's name of the pre-tokenizer (tokenizer.ggml.pre).
	Pre string
	// Split is the same pre-tokenizer as a Hugging Face Split regex (BPE).
	Split string
	// AddBOS: encoding prepends BOS.
	AddBOS bool
	// IgnoreMerges: a word that is itself a token skips the merges (llama-bpe).
	IgnoreMerges bool
	// CleanSpaces is tokenizer_config's clean_up_tokenization_spaces.
	CleanSpaces bool
	// BOS, EOS and PAD are the special tokens' texts; EOS is the chat's end of turn.
	BOS, EOS, PAD string
	// SPM: a SentencePiece-style vocabulary, whose unknown token is Unk.
	SPM bool
	Unk string
	// Specials are the special tokens generated models have: after the BPE merges, the
	// specials of every BPE tokenizer in registry order (one vocabulary serves them all);
	// first, for a SentencePiece one.
	Specials []Special
}

// Special is a special token and its llama_token_type.
type Special struct {
	Text string
	Type TokenType
}

// TokenType is llama.cpp's llama_token_type.
type TokenType int32

// The types of special tokens.
const (
	Unknown     TokenType = 2
	Control     TokenType = 3
	UserDefined TokenType = 4 // text matched as one token, not a control token (<think>)
)

// Tokenizers lists the architectures' tokenizers in registry order, each once.
func Tokenizers() []Tokenizer {
	var out []Tokenizer
	seen := map[string]bool{}
	for _, d := range All {
		if !seen[d.Tokenizer.Name] {
			seen[d.Tokenizer.Name] = true
			out = append(out, d.Tokenizer)
		}
	}
	return out
}
