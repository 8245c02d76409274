// Package chat renders [system?, user] conversations into the prompt text each model
// family expects, with the generation prompt (the assistant header) at the end. The
// formats are data of the architecture registry (arch/, one file per architecture):
// each turn's markers, where a system message goes, a default system prompt or a dated
// preamble, hybrid thinking, and the markers by which a checkpoint's template is
// recognised.
//
// The rendered text contains the special tokens as text; tokenize it with special-token
// parsing on and without adding BOS (the llama3 text already starts with it).
package chat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/umad-dev/umad/arch"
)

// Family names a chat format.
type Family string

// Families of the tests and callers that name one; Families is the list.
const (
	Qwen25 Family = "qwen2.5"
	Qwen3  Family = "qwen3"
	Llama3 Family = "llama3"
	Gemma3 Family = "gemma3"
)

// formats are the registry's chat formats, in its order.
var formats = arch.Chats()

// Families lists the supported families: the registry's chat formats.
var Families = families()

func families() []Family {
	var out []Family
	for _, c := range formats {
		out = append(out, Family(c.Family))
	}
	return out
}

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

// List names the families for a help text: "qwen2.5, qwen3, ... or mistral".
func List() string {
	l := familyList()
	if i := strings.LastIndex(l, ", "); i >= 0 {
		return l[:i] + " or " + l[i+2:]
	}
	return l
}

func familyList() string {
	names := make([]string, len(Families))
	for i, f := range Families {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// Detect identifies the format from a model's chat template (tokenizer.chat_template): the
// first registered format whose markers it all contains. It fails on templates it does not
// recognise rather than guessing.
func Detect(template string) (Format, error) {
	if strings.TrimSpace(template) == "" {
		return Format{}, fmt.Errorf("the model has no chat template; choose one with --chat-format (%s)", familyList())
	}
	for _, c := range formats {
		if containsAll(template, c.Markers) {
			hybrid := c.Thinking != "" && strings.Contains(template, c.Thinking)
			return Format{Family: Family(c.Family), HybridThinking: hybrid}, nil
		}
	}
	head := template
	if len(head) > 60 {
		head = head[:60] + "..."
	}
	return Format{}, fmt.Errorf("unrecognised chat template %q; choose one with --chat-format (%s)", head, familyList())
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
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

// format is the family's chat format in the registry.
func format(f Family) (arch.Chat, bool) {
	for _, c := range formats {
		if c.Family == string(f) {
			return c, true
		}
	}
	return arch.Chat{}, false
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
	c, ok := format(f.Family)
	if !ok {
		return "", fmt.Errorf("render: unknown chat format %q", f.Family)
	}
	text := func(s string) string {
		if c.Trim {
			return strings.TrimSpace(s)
		}
		return s
	}
	system, hasSystem := c.DefaultSystem, c.DefaultSystem != ""
	if msgs[0].Role == "system" {
		system, hasSystem = text(msgs[0].Content), true
		msgs = msgs[1:]
	}
	if c.SystemPreamble != "" {
		date := opt.DateString
		if date == "" {
			date = c.DefaultDate
		}
		system, hasSystem = strings.ReplaceAll(c.SystemPreamble, "{date}", date)+system, true
	}
	var b strings.Builder
	b.WriteString(c.Begin)
	prefix := ""
	if t, ok := c.Turns["system"]; ok && hasSystem {
		b.WriteString(t.Open + system + t.Close)
	} else if hasSystem {
		prefix = system + c.SystemSep
	}
	for i, m := range msgs {
		content := text(m.Content)
		if i == 0 {
			content = prefix + content
		}
		t := c.Turns[m.Role]
		b.WriteString(t.Open + content + t.Close)
	}
	b.WriteString(c.Prompt)
	if f.HybridThinking && !opt.Thinking {
		b.WriteString(c.ThinkingOff)
	}
	return b.String(), nil
}

// Template is a minimal Jinja chat template of the family, written into generated tiny
// models so that Detect recognises them and Hugging Face tools render them the same way.
func Template(f Family) (string, error) {
	if c, ok := format(f); ok {
		return c.Jinja, nil
	}
	return "", fmt.Errorf("no template for chat format %q", f)
}

// ForArch is the family a generated model of architecture arch uses: its descriptor's.
func ForArch(name string) (Family, error) {
	d, err := arch.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("no chat format: %w", err)
	}
	return ParseFamily(d.Chat.Family)
}
