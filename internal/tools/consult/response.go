package consult

import "time"

// Status is how one consultation ended (the source document's ToolStatus).
type Status string

// The statuses of a Response.
const (
	// StatusSuccess: the provider answered; Output is the answer.
	StatusSuccess Status = "success"
	// StatusTimeout: no answer within the provider's timeout (or before
	// the call's deadline, or waiting for one of its slots); it was stopped.
	StatusTimeout Status = "timeout"
	// StatusNotFound: the provider's CLI is not installed (not on its PATH).
	StatusNotFound Status = "not_found"
	// StatusInvalidOutput: it answered, but not in a form toold can read:
	// nothing, garbage where JSON was expected, no answer where the
	// configuration says, or more output than the cap.
	StatusInvalidOutput Status = "invalid_output"
	// StatusError: it failed — a non-zero exit, a failure it reported, an
	// API that refused or could not be reached.
	StatusError Status = "error"
)

// Response is the answer of one provider: the source document's
// ToolResponse, without the prompt (the caller has it).
type Response struct {
	Tool      string         `json:"tool" desc:"The provider consulted."`
	Status    Status         `json:"status" desc:"success, timeout, not_found (not installed), invalid_output (an answer toold cannot read) or error." validate:"oneof=success timeout not_found invalid_output error"`
	Output    string         `json:"output" desc:"The provider's answer; after a non-zero exit, what it printed, if anything."`
	Error     *string        `json:"error" desc:"What went wrong, when the status is not success."`
	Duration  float64        `json:"duration" desc:"Seconds the consultation took, waiting for the provider's slot included."`
	Timestamp string         `json:"timestamp" desc:"When the consultation started (RFC 3339)."`
	Model     *string        `json:"model" desc:"The model asked for (or the one that answered, for an API); null when the CLI chose its own."`
	ExitCode  *int           `json:"exit_code" desc:"The CLI's exit code; null when it did not exit by itself or is an API."`
	Metadata  map[string]any `json:"metadata" desc:"Provider details: kind, containment or endpoint, stderr's end, usage, attempts, routing."`
}

// MultiResponse is the answer of consult_many: the source document's
// MultiToolResponse, plus why synthesis was skipped and the synthesis
// run's own response.
type MultiResponse struct {
	Responses map[string]Response `json:"responses" desc:"Each provider's response, by name."`
	Synthesis *string             `json:"synthesis" desc:"One answer merged from the answers that succeeded; null when skipped."`
	// SynthesisSkipped and SynthesisResponse are toold's additions.
	SynthesisSkipped  *string   `json:"synthesis_skipped" desc:"Why there is no synthesis: not asked, fewer than two answers, or the synthesis run failed."`
	SynthesisResponse *Response `json:"synthesis_response" desc:"The synthesis run's own response (provider, duration, status), when it ran."`
	TotalDuration     float64   `json:"total_duration" desc:"Seconds of wall clock for the whole call, synthesis included."`
	MaxDuration       float64   `json:"max_duration" desc:"Seconds of the slowest provider."`
	SuccessCount      int       `json:"success_count"`
	FailureCount      int       `json:"failure_count"`
	Timestamp         string    `json:"timestamp" desc:"When the call started (RFC 3339)."`
	FailureType       *string   `json:"failure_type" desc:"The failure type the call gave."`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func seconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
