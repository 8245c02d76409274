package debate

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// The expected strings below are written by hand from spec/UMAD-reference.md section 1.4.

const (
	wantInstruction = `Let's think step by step and output the final answer within \boxed{}.`
	// wantReview is the template text between the responses and the instruction, for two agents.
	wantReview = " \n Please carefully review these answers and recognize which one is right. " +
		"If one or all of them are right, please summarize the reasoning process of right ones and give the final answer. " +
		"If both of them are wrong, please correct their mistakes and provide a novel and complete solution to the problem " +
		"and give the final answer. " + wantInstruction
)

func TestTurn0Message(t *testing.T) {
	got := Turn0Message("What is $1+1$?")
	want := `What is $1+1$? Let's think step by step and output the final answer within \boxed{}.`
	if got != want {
		t.Errorf("Turn0Message:\n got %q\nwant %q", got, want)
	}
}

func TestMaskFinalAnswer(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no box leaves the text alone", "The answer is 5.", "The answer is 5."},
		{"one box is masked", `so \boxed{5}.`, `so <answer>.`},
		{"empty box is masked too", `so \boxed{}.`, `so <answer>.`},
		{"nested braces close at depth zero", `is \boxed{\frac{1}{2}} ok`, `is <answer> ok`},
		{"fbox when there is no boxed", `thus \fbox{7} done`, `thus <answer> done`},
		{"a boxed wins over a later fbox", `\boxed{3} then \fbox{4}`, `<answer> then \fbox{4}`},
		{"space form ends at the next dollar", `The answer is $\boxed 42$.`, `The answer is $<answer>$.`},
		{"space form without a dollar runs to the end", `answer: \boxed 42 apples`, `answer: <answer>`},
		{"space form replaces its duplicates", `\boxed 5 and $\boxed 5$`, `<answer> and $<answer>$`},
		{"an earlier space form does not hijack a later brace box", `$\boxed 3$ and later \boxed{4}`, `$\boxed 3$ and later <answer>`},
		{"duplicates of the last box are all replaced", `first \boxed{5}, again \boxed{5}`, `first <answer>, again <answer>`},
		{"earlier different boxes stay", `maybe \boxed{4}, no, \boxed{5}`, `maybe \boxed{4}, no, <answer>`},
		{"an unclosed last box leaves the text unchanged", `so \boxed{\frac{1}{2}`, `so \boxed{\frac{1}{2}`},
		{"an unclosed last box does not fall back to an earlier one", `\boxed{1} then \boxed{2`, `\boxed{1} then \boxed{2`},
		{"escaped braces count like braces", `\boxed{a\}b} end`, `<answer>b} end`},
		{"a box with no brace and no space never closes", `\boxed5} x`, `\boxed5} x`},
		{"multi-byte text around the box is kept", "答案是 \\boxed{五}。", "答案是 <answer>。"},
		{"mask text already present is not a box", `<answer> and \boxed{2}`, `<answer> and <answer>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaskFinalAnswer(tc.in); got != tc.want {
				t.Errorf("MaskFinalAnswer(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRemoveTemplate(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"dataset content loses the MATH instruction",
			`What is 1+1? Let's think step by step and output the final answer within \boxed{}.`, "What is 1+1?"},
		{"dataset content loses the GSM8K instruction",
			`Tom has 3 apples. Let's think step by step and output the final answer after "####".`, "Tom has 3 apples."},
		{"a decoded Qwen2.5 prompt loses system, user and assistant parts",
			"system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\nuser\nWhat is 1+1? " +
				wantInstruction + "\nassistant\n", "What is 1+1?"},
		{"white space before the instruction goes too", "Q?\n\n  " + wantInstruction + "  \n", "Q?"},
		{"no instruction: only stripped", "  Just a question \t", "Just a question"},
		{"an instruction in the middle stays", wantInstruction + " Extra", wantInstruction + " Extra"},
		{"the first user line starts the question (a reference quirk)", "The user\nasked twice user\nwhy", "asked twice user\nwhy"},
		{"Python white space includes the separators U+001C-U+001F", "\x1fQuestion?\x1c", "Question?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RemoveTemplate(tc.in); got != tc.want {
				t.Errorf("RemoveTemplate(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestDebateMessage(t *testing.T) {
	round0 := []string{`2+3=5, so \boxed{5}.`, `I think \boxed{6}. Or \boxed{5}?`}
	round1 := []string{`Agent 1 erred; \boxed{5}`, `Right, it is \boxed 5$ indeed.`}
	id := TrajectoryID{Problem: 7, Trajectory: 2}
	tests := []struct {
		name   string
		prompt Prompt
		rounds [][]string
		want   string
	}{
		{
			name:   "reference: two agents, turn 1, answers masked",
			rounds: [][]string{round0},
			want: "Given the following problem: What is 2+3? \n We have two answers: \n " +
				"agent 0 response is: 2+3=5, so <answer>.\n" +
				`agent 1 response is: I think \boxed{6}. Or <answer>?` + wantReview,
		},
		{
			name:   "reference: turn 2 shows turn 1 only, space form masked",
			rounds: [][]string{round0, round1},
			want: "Given the following problem: What is 2+3? \n We have two answers: \n " +
				"agent 0 response is: Agent 1 erred; <answer>\n" +
				"agent 1 response is: Right, it is <answer>$ indeed." + wantReview,
		},
		{
			name:   "KeepAnswers shows the boxes",
			prompt: Prompt{KeepAnswers: true},
			rounds: [][]string{round0},
			want: "Given the following problem: What is 2+3? \n We have two answers: \n " +
				`agent 0 response is: 2+3=5, so \boxed{5}.` + "\n" +
				`agent 1 response is: I think \boxed{6}. Or \boxed{5}?` + wantReview,
		},
		{
			name:   "HistoryFull shows every round oldest first under Round lines",
			prompt: Prompt{History: HistoryFull},
			rounds: [][]string{round0, round1},
			want: "Given the following problem: What is 2+3? \n We have two answers: \n " +
				"Round 1:\nagent 0 response is: 2+3=5, so <answer>.\n" +
				`agent 1 response is: I think \boxed{6}. Or <answer>?` + "\n" +
				"Round 2:\nagent 0 response is: Agent 1 erred; <answer>\n" +
				"agent 1 response is: Right, it is <answer>$ indeed." + wantReview,
		},
		{
			name:   "three agents: the count is spelled and 'both' becomes 'all'",
			rounds: [][]string{{"a", "b", "c"}},
			want: "Given the following problem: What is 2+3? \n We have three answers: \n " +
				"agent 0 response is: a\nagent 1 response is: b\nagent 2 response is: c" +
				strings.Replace(wantReview, "If both of them", "If all of them", 1),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.prompt.Message("What is 2+3?", tc.rounds, id)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Message:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestDebateMessageRejectsBadRounds(t *testing.T) {
	tests := []struct {
		name   string
		rounds [][]string
	}{
		{"turn 0 has no debate message", nil},
		{"a round needs responses", [][]string{{}}},
		{"rounds must have the same agents", [][]string{{"a", "b"}, {"c"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := (Prompt{}).Message("q", tc.rounds, TrajectoryID{}); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestAnonymisedLabels(t *testing.T) {
	p := Prompt{Anonymise: true, Seed: 11}
	seenSwap, seenKeep := false, false
	for problem := range uint64(64) {
		id := TrajectoryID{Problem: problem, Trajectory: 3}
		labels := p.Labels(id, 1, 4)
		seen := make([]bool, 4)
		for _, l := range labels {
			if l < 0 || l >= 4 || seen[l] {
				t.Fatalf("labels %v are not a permutation of 0..3", labels)
			}
			seen[l] = true
		}
		if again := p.Labels(id, 1, 4); !equalInts(again, labels) {
			t.Fatalf("labels are not reproducible: %v then %v", labels, again)
		}
		two := p.Labels(id, 1, 2)
		if two[0] == 1 {
			seenSwap = true
		} else {
			seenKeep = true
		}
	}
	if !seenSwap || !seenKeep {
		t.Errorf("over 64 problems two agents were always in one order (swapped %v, kept %v)", seenSwap, seenKeep)
	}
	if got := (Prompt{Seed: 11}).Labels(TrajectoryID{Problem: 1}, 1, 3); !equalInts(got, []int{0, 1, 2}) {
		t.Errorf("without Anonymise labels are %v, want the identity", got)
	}
	// Labels depend on the turn and the seed: among 64 trajectories some must differ.
	differsByTurn, differsBySeed := false, false
	for k := range uint64(64) {
		id := TrajectoryID{Problem: 5, Trajectory: k}
		base := p.Labels(id, 1, 4)
		differsByTurn = differsByTurn || !equalInts(base, p.Labels(id, 2, 4))
		differsBySeed = differsBySeed || !equalInts(base, Prompt{Anonymise: true, Seed: 12}.Labels(id, 1, 4))
	}
	if !differsByTurn || !differsBySeed {
		t.Errorf("labels ignore the turn (%v) or the seed (%v)", !differsByTurn, !differsBySeed)
	}
}

func TestAnonymisedMessageListsAgentsByLabel(t *testing.T) {
	p := Prompt{Anonymise: true, Seed: 3}
	// Find a trajectory whose three agents are not in the identity order.
	var id TrajectoryID
	var labels []int
	for k := range uint64(100) {
		id = TrajectoryID{Problem: 1, Trajectory: k}
		if labels = p.Labels(id, 1, 3); !equalInts(labels, []int{0, 1, 2}) {
			break
		}
	}
	responses := []string{"from A", "from B", "from C"}
	got, err := p.Message("Q", [][]string{responses}, id)
	if err != nil {
		t.Fatal(err)
	}
	shown := make([]string, 3)
	for a, l := range labels {
		shown[l] = responses[a]
	}
	want := "Given the following problem: Q \n We have three answers: \n " +
		"agent 0 response is: " + shown[0] + "\nagent 1 response is: " + shown[1] + "\nagent 2 response is: " + shown[2] +
		strings.Replace(wantReview, "If both of them", "If all of them", 1)
	if got != want {
		t.Errorf("labels %v:\n got %q\nwant %q", labels, got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFitDebateMessage(t *testing.T) {
	bytesCount := func(s string) (int, error) { return len(s), nil }
	long := strings.Repeat("step by step reasoning. ", 40) + `so \boxed{5}.`
	short := `I get \boxed{5}.`
	rounds := [][]string{{long, short}}
	id := TrajectoryID{}
	full, err := Prompt{}.Message("What is 2+3?", rounds, id)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a message that fits is not trimmed", func(t *testing.T) {
		got, trimmed, err := Prompt{}.FitMessage("What is 2+3?", rounds, id, bytesCount, len(full))
		if err != nil || trimmed || got != full {
			t.Errorf("got trimmed=%v err=%v, message changed: %v", trimmed, err, got != full)
		}
	})

	t.Run("the long response loses its head, as little as possible", func(t *testing.T) {
		limit := len(full) - 200
		got, trimmed, err := Prompt{}.FitMessage("What is 2+3?", rounds, id, bytesCount, limit)
		if err != nil || !trimmed {
			t.Fatalf("trimmed=%v err=%v", trimmed, err)
		}
		// One byte of the long response per step of the search: the best fit is exact.
		if len(got) != limit {
			t.Errorf("length %d, want exactly the limit %d", len(got), limit)
		}
		for _, part := range []string{
			"Given the following problem: What is 2+3? \n We have two answers: \n agent 0 response is: ... ",
			"reasoning. so <answer>.\nagent 1 response is: I get <answer>." + wantReview,
		} {
			if !strings.Contains(got, part) {
				t.Errorf("trimmed message lacks %q:\n%q", part, got)
			}
		}
	})

	t.Run("multi-byte responses are cut at rune boundaries", func(t *testing.T) {
		wide := [][]string{{strings.Repeat("推理", 100) + `\boxed{5}`, strings.Repeat("步骤", 100)}}
		fullWide, _ := Prompt{}.Message("Q", wide, id)
		for cut := 1; cut <= 6; cut++ {
			got, trimmed, err := Prompt{}.FitMessage("Q", wide, id, bytesCount, len(fullWide)-cut*50)
			if err != nil || !trimmed {
				t.Fatalf("cut %d: trimmed=%v err=%v", cut, trimmed, err)
			}
			if !utf8.ValidString(got) {
				t.Errorf("cut %d: message is not valid UTF-8", cut)
			}
		}
	})

	t.Run("a count error is returned", func(t *testing.T) {
		failing := func(string) (int, error) { return 0, errors.New("no tokenizer") }
		if _, _, err := (Prompt{}).FitMessage("What is 2+3?", rounds, id, failing, len(full)); err == nil || err.Error() != "no tokenizer" {
			t.Errorf("err = %v, want the count's error", err)
		}
	})

	t.Run("the template alone over the limit is an error", func(t *testing.T) {
		if _, _, err := (Prompt{}).FitMessage("What is 2+3?", rounds, id, bytesCount, 100); err == nil {
			t.Error("want an error")
		}
	})
}

// FuzzMaskFinalAnswer checks that masking never panics, only touches texts with a box,
// always leaves the mask where it changed something, and keeps valid UTF-8 valid.
func FuzzMaskFinalAnswer(f *testing.F) {
	for _, seed := range []string{`so \boxed{5}.`, `$\boxed 4$ and \boxed 4`, `\fbox{x}`, `\boxed{\frac{1}{2}`, "plain", "答案 \\boxed{五}"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := MaskFinalAnswer(s)
		if !strings.Contains(s, `\boxed`) && !strings.Contains(s, `\fbox`) && got != s {
			t.Errorf("MaskFinalAnswer(%q) = %q changed a text without a box", s, got)
		}
		if got != s && !strings.Contains(got, AnswerMask) {
			t.Errorf("MaskFinalAnswer(%q) = %q changed the text without masking", s, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Errorf("MaskFinalAnswer(%q) = %q is not valid UTF-8", s, got)
		}
	})
}
