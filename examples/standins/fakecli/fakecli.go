// Package fakecli is a local stand-in for the AI coding CLIs that
// examples/consult.yaml consults (gemini, codex, cursor-agent, claude):
// each answers a consultation as its real counterpart does in the
// non-interactive mode toold's presets use — the prompt on stdin or after
// "--", the model flag, the output format (gemini's JSON, codex's plain
// text, cursor-agent's and claude's result JSON) and --version — with a
// made-up answer, without the network or an account. Build all four into
// one directory and name it in TOOLD_EXAMPLE_CLIS, as the example's header
// says:
//
//	go build -o /tmp/toold-clis/ ./examples/standins/cli/...
package fakecli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The CLIs stood in for, as the presets name them.
var names = map[string]bool{"gemini": true, "codex": true, "cursor-agent": true, "claude": true}

// Run answers one invocation of the CLI name with args (without the
// program), reading the prompt from stdin when it is not an argument, and
// returns the exit code.
func Run(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if !names[name] {
		fmt.Fprintf(stderr, "fakecli: no stand-in for %q\n", name)
		return 64
	}
	if len(args) == 1 && args[0] == "--version" {
		fmt.Fprintf(stdout, "%s 0.0.0 (toold's offline stand-in)\n", name)
		return 0
	}
	model, prompt, hasPrompt, format := "default", "", false, "text"
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			prompt, hasPrompt = strings.Join(args[i+1:], " "), true
			i = len(args)
		case (a == "-m" || a == "--model") && i+1 < len(args):
			model = args[i+1]
			i++
		case a == "--output-format" && i+1 < len(args):
			format = args[i+1]
			i++
		}
	}
	if !hasPrompt {
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		if err != nil {
			fmt.Fprintf(stderr, "%s: reading the prompt: %v\n", name, err)
			return 1
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		fmt.Fprintf(stderr, "%s: no prompt\n", name)
		return 2
	}
	answer := Answer(name, model, prompt)
	switch {
	case format != "json":
		fmt.Fprintln(stdout, answer)
	case name == "gemini":
		writeJSON(stdout, map[string]any{"response": answer, "stats": map[string]any{"models": map[string]any{model: map[string]any{}}}})
	default: // cursor-agent, claude
		writeJSON(stdout, map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": answer})
	}
	return 0
}

// Answer is the made-up answer of the CLI name with model to prompt: it
// quotes the prompt's start, so a caller can see what reached the CLI.
func Answer(name, model, prompt string) string {
	quote := strings.Join(strings.Fields(prompt), " ")
	if len(quote) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(quote[cut]) {
			cut--
		}
		quote = quote[:cut] + "…"
	}
	return fmt.Sprintf("The stand-in %s (model %s) read your prompt (%s) and suggests checking the lock order.", name, model, quote)
}

func writeJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}
