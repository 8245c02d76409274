package arch

// Chat is a chat format as data: how a conversation of an optional system message and
// user and assistant turns is spelled for the model, and how a checkpoint's template of
// the format is recognised. The chat package renders it.
type Chat struct {
	// Family names the format (--chat-format).
	Family string
	// Markers all appear in a template of the format. Formats are tried in registry order,
	// so one whose markers include another's registers first.
	Markers []string
	// Thinking, when a template contains it, makes the template a hybrid-thinking one:
	// ThinkingOff follows the generation prompt unless thinking is asked for.
	Thinking, ThinkingOff string

	// Begin opens the prompt (a BOS, as text).
	Begin string
	// Turns spell each role's turn around its content. A format without a "system" turn
	// puts the system message at the head of the first turn, followed by SystemSep.
	Turns     map[string]Turn
	SystemSep string
	// Trim strips the contents of surrounding white space.
	Trim bool
	// DefaultSystem is the system message when the conversation has none; "": no system
	// turn then.
	DefaultSystem string
	// SystemPreamble always heads the system turn, with "{date}" replaced by the date of
	// the rendering, DefaultDate unless one is given.
	SystemPreamble, DefaultDate string
	// Prompt is the generation prompt: what the model's reply follows.
	Prompt string

	// Jinja is a minimal chat template of the format, written into generated models so that
	// the format is recognised in them and Hugging Face tools render them the same way.
	Jinja string
}

// Turn is what comes before and after a turn's content.
type Turn struct{ Open, Close string }

// chatml is ChatML's turns (Qwen).
var chatml = map[string]Turn{
	"system":    {"<|im_start|>system\n", "<|im_end|>\n"},
	"user":      {"<|im_start|>user\n", "<|im_end|>\n"},
	"assistant": {"<|im_start|>assistant\n", "<|im_end|>\n"},
}

// chatmlLoop is the Jinja of ChatML's turns after an optional system turn.
const chatmlLoop = "{%- for message in messages %}{%- if not (loop.first and message.role == 'system') %}" +
	"{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}" +
	"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// Chats lists the architectures' chat formats in registry order, each once.
func Chats() []Chat {
	var out []Chat
	seen := map[string]bool{}
	for _, d := range All {
		if !seen[d.Chat.Family] {
			seen[d.Chat.Family] = true
			out = append(out, d.Chat)
		}
	}
	return out
}
