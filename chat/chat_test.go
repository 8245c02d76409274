package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/sharedtest"
)

func TestRender(t *testing.T) {
	user := []Message{{Role: "user", Content: "What is 2+3?"}}
	withSystem := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	cases := []struct {
		name string
		f    Format
		msgs []Message
		opt  Options
		want string
	}{
		{"qwen2.5 adds its default system prompt", Format{Family: Qwen25}, user, Options{},
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5 uses a given system prompt instead", Format{Family: Qwen25}, withSystem, Options{},
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3 has no default system prompt", Format{Family: Qwen3}, user, Options{},
			"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
		{"hybrid qwen3 turns thinking off with an empty think block", Format{Family: Qwen3, HybridThinking: true}, user, Options{},
			"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"hybrid qwen3 with thinking on", Format{Family: Qwen3, HybridThinking: true}, user, Options{Thinking: true},
			"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3 always has the dated system block", Format{Family: Llama3}, user, Options{},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3 trims contents and takes a date", Format{Family: Llama3},
			[]Message{{Role: "system", Content: " Be brief. "}, {Role: "user", Content: "\nHi \n"}}, Options{DateString: "01 Jan 2026"},
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 01 Jan 2026\n\nBe brief.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"mistral opens the first [INST] with the system message", Format{Family: "mistral"}, withSystem, Options{},
			"<s>[INST] Be brief.\n\nHi[/INST]"},
	}
	for _, c := range cases {
		got, err := c.f.Render(c.msgs, c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestRenderRejects(t *testing.T) {
	f := Format{Family: Qwen3}
	for name, msgs := range map[string][]Message{
		"empty":        nil,
		"late system":  {{Role: "user", Content: "a"}, {Role: "system", Content: "b"}},
		"unknown role": {{Role: "tool", Content: "a"}},
	} {
		if _, err := f.Render(msgs, Options{}); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	if _, err := (Format{Family: "phi3"}).Render([]Message{{Role: "user"}}, Options{}); err == nil {
		t.Error("unknown family: want an error")
	}
}

// The minimal templates written into tiny models must be recognised as their family.
func TestTemplatesDetectAsTheirFamily(t *testing.T) {
	for _, f := range Families {
		tmpl, err := Template(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(tmpl)
		if err != nil || got.Family != f {
			t.Errorf("Template(%s) detects as %v, %v", f, got, err)
		}
	}
}

func TestDetectRejectsUnknown(t *testing.T) {
	for _, tmpl := range []string{"", "  ", "{% for m in messages %}<|user|>\n{{ m.content }}<|end|>{% endfor %}"} {
		if f, err := Detect(tmpl); err == nil {
			t.Errorf("Detect(%q) = %v, want an error", tmpl, f)
		} else if !strings.Contains(err.Error(), "--chat-format") {
			t.Errorf("error should say how to choose a format: %v", err)
		}
	}
}

// Real checkpoints' templates, from ../shared/tokenizers, detect as the right family.
func TestDetectRealTemplates(t *testing.T) {
	dir := sharedtest.Path(t, "tokenizers")
	cases := map[string]Format{
		"Qwen2.5-3B-Instruct":    {Family: Qwen25},
		"Qwen3-4B":               {Family: Qwen3, HybridThinking: true},
		"Qwen3-4B-Instruct-2507": {Family: Qwen3},
		"Llama-3.2-3B-Instruct":  {Family: Llama3},
	}
	for name, want := range cases {
		raw, err := os.ReadFile(filepath.Join(dir, name, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		got, err := Detect(cfg.ChatTemplate)
		if err != nil || got != want {
			t.Errorf("%s: Detect = %+v, %v; want %+v", name, got, err, want)
		}
	}
}

func TestParseFamilyAndForArch(t *testing.T) {
	if f, err := ParseFamily("Qwen2.5"); err != nil || f != Qwen25 {
		t.Errorf("ParseFamily(Qwen2.5) = %v, %v", f, err)
	}
	if _, err := ParseFamily("chatml"); err == nil {
		t.Error("ParseFamily(chatml): want an error")
	}
	for arch, want := range map[string]Family{"qwen2": Qwen25, "qwen3": Qwen3, "llama": Llama3} {
		if f, err := ForArch(arch); err != nil || f != want {
			t.Errorf("ForArch(%s) = %v, %v", arch, f, err)
		}
	}
	if _, err := ForArch("gemma"); err == nil {
		t.Error("ForArch(gemma): want an error")
	}
}

func TestResolve(t *testing.T) {
	qwen3, err := Template(Qwen3)
	if err != nil {
		t.Fatal(err)
	}
	hybrid := qwen3 + "{% if enable_thinking %}{% endif %}"
	for _, c := range []struct {
		template, override string
		want               Format
		fails              bool
	}{
		{template: qwen3, want: Format{Family: Qwen3}},
		{template: hybrid, want: Format{Family: Qwen3, HybridThinking: true}},
		{template: hybrid, override: "qwen3", want: Format{Family: Qwen3, HybridThinking: true}},
		{template: hybrid, override: "llama3", want: Format{Family: Llama3}},
		{template: "", override: "qwen2.5", want: Format{Family: Qwen25}},
		{template: "", fails: true},
		{template: qwen3, override: "phi3", fails: true},
	} {
		got, err := Resolve(c.template, c.override)
		if (err != nil) != c.fails || (!c.fails && got != c.want) {
			t.Errorf("Resolve(%.20q, %q) = %+v, %v; want %+v (error %v)", c.template, c.override, got, err, c.want, c.fails)
		}
	}
}
