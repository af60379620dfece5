// Package httpapi serves HTTP APIs as tools (category external_api),
// declared in configuration the way command tools are: an operator writes
// the request — method, a URL template whose scheme and host are literal,
// query values, headers and a JSON body filled from the arguments, one
// credential — and how the answer becomes the result (JSON or text, a size
// cap, a jq expression, an output schema).
//
// What a call does:
//
//   - The request is built from the arguments with every value escaped into
//     its place: a path placeholder is one segment ("..", "." and empty
//     ones refused), query values are encoded, a header with a line break
//     or over its cap is refused, body values keep their JSON types. The
//     URL's host is the template's, checked after rendering.
//   - It waits out the tool's and the host's token buckets (golang.org/x/time/rate)
//     and a Retry-After the host sent, when that fits the deadline, and is
//     refused with a retry hint otherwise.
//   - The host's circuit breaker (github.com/sony/gobreaker/v2) refuses at
//     once while open; connection failures, 5xx answers and attempts that
//     time out count against it.
//   - The request goes out through internal/netguard (the SSRF guard) and
//     follows redirects only on its own host. Its credential is never
//     logged, never shown in discovery or envelopes, and scrubbed from the
//     answer and from every message before anything reads them.
//   - Connection failures, 408, 429, 502, 503 and 504 are retried — for
//     idempotent tools, or when nothing was sent — with exponential backoff
//     and full jitter, or the API's Retry-After, inside the one deadline.
//     Attempts and waits are counted into the envelope's timing.
//   - The answer maps to what a model can act on: 2xx is the result, other
//     4xx a user_error with the API's message, 401 and 403 a
//     permission_error for the operator, 429 an overload_error with
//     retry_after_ms, 5xx and no answer a retryable system_error, a body that
//     is not the JSON declared invalid_output.
//
// All of it is a Client's: each listed tool calls its own, and another kind
// of tool that must reach an API (a consultation provider asking a model)
// makes one with Set.Client from a declaration of the same form: it is the
// one way a declared API is called. (toold's own outbound requests — the
// approval webhook, an OAuth issuer's metadata and keys, hosted MCP
// servers over HTTP — need none of this machinery; like every connection
// toold makes, they dial through netguard.)
package httpapi
