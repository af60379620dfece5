package tools

// Code is a stable, machine-readable refinement of an error's Kind: the
// envelope's error.code. It is a named type so that a misspelt code is a
// compile error rather than a new code; on the wire it is the plain string.
// Every code toold produces is declared here, once, and listed in Codes;
// api/openapi.yaml lists the same set (api's tests hold them equal), and
// internal/server's status table switches on them.
type Code string

// Codes of a request refused before (or instead of) running a tool.
const (
	CodeInvalidJSON          Code = "invalid_json"           // the body, or an answer, is not the JSON asked for
	CodeBodyTooLarge         Code = "body_too_large"         // the request body is over its limit (413)
	CodeBodyTimeout          Code = "body_timeout"           // the client stalled while sending the body (408)
	CodeBodyUnreadable       Code = "body_unreadable"        // the request body could not be read
	CodeBodyBudget           Code = "body_budget"            // bodies being read together are over their memory budget (503)
	CodeUnsupportedMediaType Code = "unsupported_media_type" // the body is not JSON (415)
	CodeMethodNotAllowed     Code = "method_not_allowed"     // the route does not take this method (405)
	CodeNoRoute              Code = "no_route"               // no route has this path (404)
	CodeInvalidHeader        Code = "invalid_header"         // a request header toold reads is malformed
	CodeInvalidParameter     Code = "invalid_parameter"      // a query parameter is malformed
	CodeUnknownFormat        Code = "unknown_format"         // GET /tools?format= names no rendering
	CodeUnknownToolset       Code = "unknown_toolset"        // a search names no toolset
	CodeSearchUnavailable    Code = "search_unavailable"     // defer_loading needs the search tool, which is not there
	CodeConnectionCapacity   Code = "connection_capacity"    // the listener is at its connection limit (503)
	CodeHostNotAllowed       Code = "host_not_allowed"       // the Host header is not one toold serves (DNS rebinding)
	CodeOriginNotAllowed     Code = "origin_not_allowed"     // a browser Origin toold does not accept
	CodeInvalidOutput        Code = "invalid_output"         // the tool's result does not fit its output schema
)

// Codes of who may call: credentials, roles, console sessions.
const (
	CodeUnauthenticated   Code = "unauthenticated"    // no or bad credentials (401)
	CodeForbidden         Code = "forbidden"          // the caller may not use this tool
	CodeMissingRole       Code = "missing_role"       // the caller lacks the role the route needs
	CodeCSRF              Code = "csrf"               // a session-cookie request without its CSRF token
	CodeIssuerUnavailable Code = "issuer_unavailable" // the token issuer could not be reached (503)
	CodeNoIssuer          Code = "no_issuer"          // a console sign-in names no configured issuer (404)
	CodeTokenRefused      Code = "token_refused"      // a Toold-Confirm token is not valid for this call (428)
	CodeDeclined          Code = "declined"           // the MCP client's user declined to confirm the call
)

// Codes of policies and tool integrity.
const (
	CodePolicyDenied          Code = "policy_denied"           // a policy refuses the request; the message names the policies (403)
	CodeToolDefinitionChanged Code = "tool_definition_changed" // the upstream changed the tool (or it is new) and no admin accepted it yet (403)
	CodeNoPendingChange       Code = "no_pending_change"       // no change of this tool waits for a decision (404)
)

// Codes of configuration reloads (POST /admin/reload).
const (
	CodeInvalidConfig Code = "invalid_config" // the configuration file does not parse, validate or build; the old one keeps serving (422)
	CodeRestartNeeded Code = "restart_needed" // the file changes a setting only a restart applies; the old one keeps serving (409)
)

// Codes of admission: capacity, rates, cancellation and shutdown.
const (
	CodeQueueFull      Code = "queue_full"      // the tool's bulkhead queue is full (429)
	CodeQueueTimeout   Code = "queue_timeout"   // the call waited in the queue past its bound (503)
	CodeGlobalCapacity Code = "global_capacity" // toold is at its global capacity (429)
	CodeServerCapacity Code = "server_capacity" // an upstream MCP server is at its call limit (429)
	CodePrincipalRate  Code = "principal_rate"  // the caller is over its call rate (429)
	CodePrincipalShare Code = "principal_share" // the caller holds its share of a tool's slots (429)
	CodeDraining       Code = "draining"        // toold is shutting down and takes no new work (503)
	CodeCancelled      Code = "cancelled"       // the caller cancelled the call, or left
)

// Codes of executions, batches, waits and approvals.
const (
	CodeNoExecution          Code = "no_execution"           // no execution has this id (404)
	CodeNoArtifact           Code = "no_artifact"            // no artifact has this id for this caller, or it expired (404)
	CodeInvalidRange         Code = "invalid_range"          // a Range header asks for no byte of what it reads (416)
	CodeInterrupted          Code = "interrupted"            // a replica stopped while running it; it may have taken effect
	CodeInvalidBatch         Code = "invalid_batch"          // a batch request is malformed
	CodeSkipped              Code = "skipped"                // not run: an earlier call of the batch failed
	CodeWaitsInBatch         Code = "waits_in_batch"         // a call of a batch began to wait, which a batch cannot
	CodeIdempotencyKeyReused Code = "idempotency_key_reused" // the Idempotency-Key came with other arguments (422)
	CodeIdempotencyInFlight  Code = "idempotency_in_flight"  // the call of this Idempotency-Key is still running (409)
	CodeRedundantCall        Code = "redundant_call"         // the same call already ran in this turn
	CodeStoreUnavailable     Code = "store_unavailable"      // the state store cannot be reached (503)
	CodeStoreFull            Code = "store_full"             // the state store is out of space (507)
	CodeNoStore              Code = "no_store"               // the work needs the state store, which is off
	CodeNotWaiting           Code = "not_waiting"            // the execution waits for nothing (409)
	CodeExecutionEnded       Code = "execution_ended"        // the execution has already ended (409)
	CodeWaitExpired          Code = "wait_expired"           // the wait ended before an answer came
	CodeWaitsForApproval     Code = "waits_for_approval"     // an approval is a person's to give, not the caller's (409)
	CodeNotASubtask          Code = "not_a_subtask"          // a result was sent for a wait that is not a subtask
	CodeInvalidAnswer        Code = "invalid_answer"         // the answer does not fit what the wait asked for
	CodeNoApproval           Code = "no_approval"            // no call waits for approval under this id (404)
	CodeAlreadyDecided       Code = "already_decided"        // the approval was already given or refused (409)
	CodeDenied               Code = "denied"                 // a person refused the call
	CodeSelfApproval         Code = "self_approval"          // a caller may not approve its own call
	CodeAnonymousApproval    Code = "anonymous_approval"     // approving needs a named caller
	CodeTooDeep              Code = "too_deep"               // subtasks nest deeper than allowed
	CodeCycle                Code = "cycle"                  // a subtask is the same as one it is part of
)

// Codes of the input sanitizer.
const (
	CodeControlCharacter Code = "control_character" // a string argument carries a control character
	CodeNulByte          Code = "nul_byte"          // a string or path carries a NUL byte
	CodeTooLong          Code = "too_long"          // a string argument is over the tool's limit
	CodeTooLarge         Code = "too_large"         // the arguments are over the tool's limit
	CodeKeyCollision     Code = "key_collision"     // two keys are the same once cleaned
	CodeSecretBlocked    Code = "secret_blocked"    // the arguments carry a credential the tool refuses
	CodePIIBlocked       Code = "pii_blocked"       // the arguments carry personal data the tool refuses
)

// Codes of the file tools.
const (
	CodeEmptyPath          Code = "empty_path"          // the path is empty
	CodeAbsolutePath       Code = "absolute_path"       // the path is absolute where a relative one is needed
	CodePathEscape         Code = "path_escape"         // the path leads out of the workspace
	CodePathTooLong        Code = "path_too_long"       // the path, or one of its names, is too long
	CodeInvalidName        Code = "invalid_name"        // a name the platform reserves (a device, a data stream)
	CodeSymlinkEscape      Code = "symlink_escape"      // a symlink leads out of the workspace
	CodeSymlinkLoop        Code = "symlink_loop"        // symlinks loop
	CodeNotFound           Code = "not_found"           // no such file or directory
	CodePermissionDenied   Code = "permission_denied"   // the operating system refused access
	CodeIsDirectory        Code = "is_directory"        // a file was expected, a directory found
	CodeIsSymlink          Code = "is_symlink"          // a file was expected, a symlink found
	CodeNotRegularFile     Code = "not_regular_file"    // a device, socket or pipe where a file was expected
	CodeNotADirectory      Code = "not_a_directory"     // a directory was expected, a file found
	CodeBinaryFile         Code = "binary_file"         // the file is not text
	CodeFileTooLarge       Code = "file_too_large"      // the file is over the read limit
	CodeReadBudget         Code = "read_budget"         // the call already returned its limit of bytes
	CodeConflict           Code = "conflict"            // the file changed since it was read
	CodeContentTooLarge    Code = "content_too_large"   // the content to write is over the limit
	CodeNoChange           Code = "no_change"           // the edit would change nothing
	CodeOccurrenceMismatch Code = "occurrence_mismatch" // the text to replace occurs another number of times
	CodeInvalidGlob        Code = "invalid_glob"        // a glob pattern does not parse
	CodeInvalidRegexp      Code = "invalid_regexp"      // a regular expression does not parse
	CodeProtectedPath      Code = "protected_path"      // the file is one toold will not write (it runs or configures)
)

// Codes of the command tools and the launcher.
const (
	CodeProgramNotAllowed    Code = "program_not_allowed"    // the program is not on the tool's list
	CodeSubcommandNotAllowed Code = "subcommand_not_allowed" // the subcommand is not on the tool's list
	CodeOptionNotAllowed     Code = "option_not_allowed"     // the option is not on the tool's list
	CodeOptionInjection      Code = "option_injection"       // an argument would be read as an option
	CodeShellSyntax          Code = "shell_syntax"           // the command line uses shell syntax toold does not run
	CodeSandboxFailed        Code = "sandbox_failed"         // the launcher could not set up the sandbox
	CodeOutsideWorkspace     Code = "outside_workspace"      // the command would run outside the workspace
	CodeTimedOut             Code = "timed_out"              // the command outlived its timeout and was stopped
	CodeKilled               Code = "killed"                 // the command was killed by a signal
	CodeOutputTruncated      Code = "output_truncated"       // the command wrote more than its output cap
	CodeExitStatus           Code = "exit_status"            // the command exited with a failure code
)

// Codes of HTTP API tools, upstream MCP servers and consultation.
const (
	CodeUpstreamRejected    Code = "upstream_rejected"     // the API answered 4xx (200: the caller can fix it)
	CodeUpstreamAuth        Code = "upstream_auth"         // the API refused toold's credentials (502)
	CodeUpstreamRateLimited Code = "upstream_rate_limited" // the API asked toold to wait (429)
	CodeRateLimited         Code = "rate_limited"          // toold's own rate for the API (429)
	CodeCircuitOpen         Code = "circuit_open"          // the API's circuit breaker is open (503)
	CodeUpstreamError       Code = "upstream_error"        // the API or MCP server failed (502)
	CodeUpstreamUnreachable Code = "upstream_unreachable"  // the API could not be reached (502)
	CodeUpstreamUnavailable Code = "upstream_unavailable"  // the MCP server is not connected (503) or was lost (502)
	CodeUpstreamRefused     Code = "upstream_refused"      // the MCP server refused the call's arguments
	CodeResponseTooLarge    Code = "response_too_large"    // the API's answer is over the limit
	CodeSSRFRefused         Code = "ssrf_refused"          // the address is one toold does not dial
	CodeRedirectRefused     Code = "redirect_refused"      // the API redirected where toold does not follow
	CodeHeaderTooLarge      Code = "header_too_large"      // a request header is over the limit
	CodeURLChanged          Code = "url_changed"           // the arguments would change the URL's host
	CodeNoProvider          Code = "no_provider"           // no consultation provider is available
)

// Codes of acting as the user: OAuth connections and per-principal
// credentials (internal/credentials, internal/delegate).
const (
	CodeAuthorizationRequired Code = "authorization_required" // the caller has not connected the downstream: see authorize_url (403)
	CodeCredentialRequired    Code = "credential_required"    // the caller has not set the credential a tool needs (403)
	CodeDelegationRefused     Code = "delegation_refused"     // toold will not send the caller's credential to this downstream (403)
	CodeNoConnection          Code = "no_connection"          // no OAuth connection or credential has this name (404)
	CodeNoVault               Code = "no_vault"               // per-user credentials are not configured (credentials.key)
)

// Codes lists every code (the contract file and tests enumerate them).
var Codes = []Code{
	CodeInvalidJSON, CodeBodyTooLarge, CodeBodyTimeout, CodeBodyUnreadable, CodeBodyBudget,
	CodeUnsupportedMediaType, CodeMethodNotAllowed, CodeNoRoute, CodeInvalidHeader, CodeInvalidParameter,
	CodeUnknownFormat, CodeUnknownToolset, CodeSearchUnavailable, CodeConnectionCapacity,
	CodeHostNotAllowed, CodeOriginNotAllowed, CodeInvalidOutput,

	CodeUnauthenticated, CodeForbidden, CodeMissingRole, CodeCSRF, CodeIssuerUnavailable, CodeNoIssuer,
	CodeTokenRefused, CodeDeclined,

	CodePolicyDenied, CodeToolDefinitionChanged, CodeNoPendingChange,
	CodeInvalidConfig, CodeRestartNeeded,

	CodeQueueFull, CodeQueueTimeout, CodeGlobalCapacity, CodeServerCapacity, CodePrincipalRate,
	CodePrincipalShare, CodeDraining, CodeCancelled,

	CodeNoExecution, CodeNoArtifact, CodeInvalidRange, CodeInterrupted, CodeInvalidBatch, CodeSkipped, CodeWaitsInBatch,
	CodeIdempotencyKeyReused, CodeIdempotencyInFlight, CodeRedundantCall, CodeStoreUnavailable,
	CodeStoreFull, CodeNoStore, CodeNotWaiting, CodeExecutionEnded, CodeWaitExpired, CodeWaitsForApproval,
	CodeNotASubtask, CodeInvalidAnswer, CodeNoApproval, CodeAlreadyDecided, CodeDenied, CodeSelfApproval,
	CodeAnonymousApproval, CodeTooDeep, CodeCycle,

	CodeControlCharacter, CodeNulByte, CodeTooLong, CodeTooLarge, CodeKeyCollision, CodeSecretBlocked,
	CodePIIBlocked,

	CodeEmptyPath, CodeAbsolutePath, CodePathEscape, CodePathTooLong, CodeInvalidName, CodeSymlinkEscape, CodeSymlinkLoop,
	CodeNotFound, CodePermissionDenied, CodeIsDirectory, CodeIsSymlink, CodeNotRegularFile,
	CodeNotADirectory, CodeBinaryFile, CodeFileTooLarge, CodeReadBudget, CodeConflict, CodeContentTooLarge,
	CodeNoChange, CodeOccurrenceMismatch, CodeInvalidGlob, CodeInvalidRegexp, CodeProtectedPath,

	CodeProgramNotAllowed, CodeSubcommandNotAllowed, CodeOptionNotAllowed, CodeOptionInjection,
	CodeShellSyntax, CodeSandboxFailed, CodeOutsideWorkspace, CodeTimedOut, CodeKilled, CodeOutputTruncated,
	CodeExitStatus,

	CodeUpstreamRejected, CodeUpstreamAuth, CodeUpstreamRateLimited, CodeRateLimited, CodeCircuitOpen,
	CodeUpstreamError, CodeUpstreamUnreachable, CodeUpstreamUnavailable, CodeUpstreamRefused,
	CodeResponseTooLarge, CodeSSRFRefused, CodeRedirectRefused, CodeHeaderTooLarge, CodeURLChanged,
	CodeNoProvider,

	CodeAuthorizationRequired, CodeCredentialRequired, CodeDelegationRefused, CodeNoConnection, CodeNoVault,
}
