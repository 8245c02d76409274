// Package chat renders [system?, user] conversations into the prompt text each model
// family expects, with the generation prompt (the assistant header) at the end.
//
// Families:
//   - qwen2.5: ChatML; with no system message the template's default system prompt
//     "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." is used.
//   - qwen3: ChatML, no default system prompt. Hybrid-thinking checkpoints (templates
//     that read enable_thinking, e.g. Qwen3-4B) get the empty think block that turns
//     thinking off, unless Options.Thinking is set; Qwen3-*-2507 instruct templates have
//     no such switch and render plain ChatML.
//   - llama3: Llama 3.x headers; the system block carries the "Cutting Knowledge Date"
//     preamble and a date (fixed, for reproducibility: "26 Jul 2024" unless given).
//   - gemma3: Gemma's turns (<start_of_turn>user / model); a system message has no turn of
//     its own and opens the first user turn, followed by a blank line.
//
// The rendered text contains the special tokens as text; tokenize it with special-token
// parsing on and without adding BOS (the llama3 text already starts with it).
package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/umad-dev/umad/model/arch"
)

// Family names a chat format.
type Family string

// The families umad targets.
const (
	Qwen25 Family = "qwen2.5"
	Qwen3  Family = "qwen3"
	Llama3 Family = "llama3"
	Gemma3 Family = "gemma3"
)

// Families lists the supported families.
var Families = []Family{Qwen25, Qwen3, Llama3, Gemma3}

// QwenDefaultSystem is Qwen2.5's system prompt when none is given.
const QwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// Format is a family plus the facts read from a checkpoint's template.
type Format struct {
	Family Family
	// HybridThinking is true when the template has an enable_thinking switch.
	HybridThinking bool
}

// Options adjusts rendering.
type Options struct {
	Thinking   bool   // leave thinking on for hybrid-thinking templates
	DateString string // llama3 "Today Date"; "" = "26 Jul 2024"
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ParseFamily accepts a family name.
func ParseFamily(s string) (Family, error) {
	for _, f := range Families {
		if strings.EqualFold(s, string(f)) {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown chat format %q (want %s)", s, familyList())
}

func familyList() string {
	names := make([]string, len(Families))
	for i, f := range Families {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// Detect identifies the format from a model's chat template (tokenizer.chat_template).
// It fails on templates it does not recognise rather than guessing.
func Detect(template string) (Format, error) {
	switch {
	case strings.TrimSpace(template) == "":
		return Format{}, fmt.Errorf("the model has no chat template; choose one with --chat-format (%s)", familyList())
	case strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, "<|eot_id|>"):
		return Format{Family: Llama3}, nil
	case strings.Contains(template, "<start_of_turn>") && strings.Contains(template, "<end_of_turn>"):
		return Format{Family: Gemma3}, nil
	case strings.Contains(template, "<|im_start|>") && strings.Contains(template, QwenDefaultSystem):
		return Format{Family: Qwen25}, nil
	case strings.Contains(template, "<|im_start|>") && strings.Contains(template, "<|im_end|>"):
		return Format{Family: Qwen3, HybridThinking: strings.Contains(template, "enable_thinking")}, nil
	}
	head := template
	if len(head) > 60 {
		head = head[:60] + "..."
	}
	return Format{}, fmt.Errorf("unrecognised chat template %q; choose one with --chat-format (%s)", head, familyList())
}

// Resolve picks a model's chat format: the override (a family name from a --chat-format
// flag) when given, keeping the template's thinking switch when the template is of that
// family; else the format detected from the template.
func Resolve(template, override string) (Format, error) {
	if override == "" {
		return Detect(template)
	}
	f, err := ParseFamily(override)
	if err != nil {
		return Format{}, err
	}
	detected, derr := Detect(template)
	return Format{Family: f, HybridThinking: derr == nil && detected.Family == f && detected.HybridThinking}, nil
}

// Render turns a conversation of an optional system message followed by user (and
// assistant) messages into prompt text ending with the assistant header.
func (f Format) Render(msgs []Message, opt Options) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("render: empty conversation")
	}
	for i, m := range msgs {
		switch {
		case m.Role == "system" && i != 0:
			return "", errors.New("render: a system message may only come first")
		case m.Role != "system" && m.Role != "user" && m.Role != "assistant":
			return "", fmt.Errorf("render: unknown role %q", m.Role)
		}
	}
	var b strings.Builder
	switch f.Family {
	case Qwen25, Qwen3:
		if msgs[0].Role == "system" {
			chatml(&b, "system", msgs[0].Content)
			msgs = msgs[1:]
		} else if f.Family == Qwen25 {
			chatml(&b, "system", QwenDefaultSystem)
		}
		for _, m := range msgs {
			chatml(&b, m.Role, m.Content)
		}
		b.WriteString("<|im_start|>assistant\n")
		if f.HybridThinking && !opt.Thinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	case Llama3:
		system := ""
		if msgs[0].Role == "system" {
			system = strings.TrimSpace(msgs[0].Content)
			msgs = msgs[1:]
		}
		date := opt.DateString
		if date == "" {
			date = "26 Jul 2024"
		}
		b.WriteString("<|begin_of_text|>")
		llamaBlock(&b, "system", "Cutting Knowledge Date: December 2023\nToday Date: "+date+"\n\n"+system)
		for _, m := range msgs {
			llamaBlock(&b, m.Role, strings.TrimSpace(m.Content))
		}
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	case Gemma3:
		prefix := ""
		if msgs[0].Role == "system" {
			prefix = strings.TrimSpace(msgs[0].Content) + "\n\n"
			msgs = msgs[1:]
		}
		b.WriteString("<bos>")
		for i, m := range msgs {
			role, content := m.Role, strings.TrimSpace(m.Content)
			if role == "assistant" {
				role = "model"
			}
			if i == 0 {
				content = prefix + content
			}
			b.WriteString("<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n")
		}
		b.WriteString("<start_of_turn>model\n")
	default:
		return "", fmt.Errorf("render: unknown chat format %q", f.Family)
	}
	return b.String(), nil
}

func chatml(b *strings.Builder, role, content string) {
	b.WriteString("<|im_start|>" + role + "\n" + content + "<|im_end|>\n")
}

func llamaBlock(b *strings.Builder, role, content string) {
	b.WriteString("<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>")
}

// Template is a minimal Jinja chat template of the family, written into generated tiny
// models so that Detect recognises them and Hugging Face tools render them the same way.
func Template(f Family) (string, error) {
	const chatmlLoop = "{%- for message in messages %}{%- if not (loop.first and message.role == 'system') %}" +
		"{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}" +
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
	switch f {
	case Qwen25:
		return "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}" +
			"{%- else %}{{- '<|im_start|>system\\n" + QwenDefaultSystem + "<|im_end|>\\n' }}{%- endif %}" + chatmlLoop, nil
	case Qwen3:
		return "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}" +
			chatmlLoop, nil
	case Llama3:
		return "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}" +
			"{%- if messages[0].role == 'system' %}{%- set system_message = messages[0].content | trim %}{%- set messages = messages[1:] %}" +
			"{%- else %}{%- set system_message = '' %}{%- endif %}" +
			"{{- '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\nToday Date: ' + date_string + '\\n\\n' + system_message + '<|eot_id|>' }}" +
			"{%- for message in messages %}{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}{%- endfor %}" +
			"{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}", nil
	case Gemma3:
		return "{{- bos_token }}{%- if messages[0].role == 'system' %}{%- set prefix = messages[0].content | trim + '\\n\\n' %}" +
			"{%- set messages = messages[1:] %}{%- else %}{%- set prefix = '' %}{%- endif %}" +
			"{%- for message in messages %}{%- set role = 'model' if message.role == 'assistant' else message.role %}" +
			"{{- '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message.content | trim + '<end_of_turn>\\n' }}{%- endfor %}" +
			"{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}", nil
	}
	return "", fmt.Errorf("no template for chat format %q", f)
}

// ForArch is the family a generated model of architecture arch uses: its descriptor's.
func ForArch(name string) (Family, error) {
	d, err := arch.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("no chat format: %w", err)
	}
	return ParseFamily(d.Chat)
}
