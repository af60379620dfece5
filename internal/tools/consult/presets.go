package consult

import (
	"cmp"

	"github.com/toold/toold/internal/launch"
)

// presets are the built-in settings of the CLIs the source document
// consults, plus claude. Each runs the CLI once per consultation without a
// terminal and reads its answer from stdout; every field can be overridden
// in the provider's configuration. Flags follow the CLIs' documented
// non-interactive modes at the time of writing:
//
//   - gemini: headless when stdin is not a terminal; the prompt on stdin,
//     --output-format json wraps the answer as {"response", "stats",
//     "error"}; -m picks the model.
//   - codex: `codex exec` takes the prompt as its last argument (after
//     "--") and prints only the final message on stdout (progress goes to
//     stderr); --skip-git-repo-check lets it run in a workspace that is not
//     a git repository; -m picks the model.
//   - cursor-agent: -p prints instead of opening its interface; the prompt
//     is the last argument, after "--"; --output-format json answers
//     {"type": "result", "is_error", "result", …}.
//   - claude: -p prints; the prompt on stdin; --output-format json answers
//     {"type": "result", "is_error", "result", …}.
//
// EnvAllow passes each CLI's own credentials and nothing else of toold's
// environment.
var presets = map[string]ProviderConfig{
	"gemini": {
		Command: "gemini", Args: []string{"--output-format", "json"}, Prompt: "stdin", ModelFlag: "-m",
		Output: "json", AnswerPath: "response", ErrorPath: "error",
		Sandbox: envAllow("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
			"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS"),
	},
	"codex": {
		Command: "codex", Args: []string{"exec", "--skip-git-repo-check"}, Prompt: "arg", ModelFlag: "-m", Output: "text",
		Sandbox: envAllow("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"),
	},
	"cursor-agent": {
		Command: "cursor-agent", Args: []string{"-p", "--output-format", "json"}, Prompt: "arg",
		ModelFlag: "--model", Output: "json", AnswerPath: "result", ErrorPath: "is_error",
		Sandbox: envAllow("CURSOR_API_KEY"),
	},
	"claude": {
		Command: "claude", Args: []string{"-p", "--output-format", "json"}, Prompt: "stdin",
		ModelFlag: "--model", Output: "json", AnswerPath: "result", ErrorPath: "is_error",
		Sandbox: envAllow("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK",
			"CLAUDE_CODE_USE_VERTEX"),
	},
}

// envAllow is a preset's sandbox: the CLI's own variables passed on.
func envAllow(names ...string) Sandbox {
	return Sandbox{Sandbox: launch.Sandbox{EnvAllow: names}}
}

// overPreset returns pc with every field it leaves unset taken from the
// preset: a set field, list or map replaces the preset's.
func overPreset(pc, preset ProviderConfig) ProviderConfig {
	pc.Command = cmp.Or(pc.Command, preset.Command)
	pc.Prompt = cmp.Or(pc.Prompt, preset.Prompt)
	pc.PromptFlag = cmp.Or(pc.PromptFlag, preset.PromptFlag)
	pc.ModelFlag = cmp.Or(pc.ModelFlag, preset.ModelFlag)
	pc.Output = cmp.Or(pc.Output, preset.Output)
	pc.AnswerPath = cmp.Or(pc.AnswerPath, preset.AnswerPath)
	pc.ErrorPath = cmp.Or(pc.ErrorPath, preset.ErrorPath)
	if pc.Args == nil {
		pc.Args = preset.Args
	}
	if pc.VersionArgs == nil {
		pc.VersionArgs = preset.VersionArgs
	}
	if pc.Sandbox.EnvAllow == nil {
		pc.Sandbox.EnvAllow = preset.Sandbox.EnvAllow
	}
	return pc
}
