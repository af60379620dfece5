// Package consult serves consultation of AI coding assistants as toold
// tools (category subtask): consult asks one provider, consult_many asks
// several in parallel and synthesizes their answers, consult_providers
// says which are enabled, installed and working.
//
// A provider is a CLI run once per consultation in the command tools'
// sandbox (built-in presets for gemini, codex, cursor-agent and claude;
// the network on, the workspace read-only, only the provider's own
// credentials from toold's environment), or an OpenAI-compatible chat
// completions API reached through an httpapi Client, as HTTP tools reach
// theirs (the SSRF guard, retries, rates and the host's breaker).
//
// Every consultation ends in a Response with a status (success, timeout,
// not_found, invalid_output, error): a provider failing is information for
// the model, not a failed call. What is refused before anything runs —
// an empty prompt, one over the cap, a provider or model not configured —
// is a validation error. The prompt a provider receives is the one the
// pipeline's input sanitizer left: the subtask category redacts secrets and
// personal data from arguments by default.
//
// Concurrency: each tool has the subtask bulkhead (4 in flight, 20
// queued); each provider has its own slots (max_in_flight, 4), shared by
// every call and tool, and a run waits for one within its own timeout. So
// "each provider within its own slot" in consult_many means a provider busy
// with other calls delays (or times out) only its own answer.
package consult
