package consult

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/httpapi"
)

// apiProvider consults an OpenAI-compatible chat completions endpoint
// through two httpapi Clients: the SSRF guard, retries with backoff and
// Retry-After, rates, the host's circuit breaker and the upstream metrics
// are theirs, as an HTTP tool's are.
type apiProvider struct {
	s        *spec
	endpoint string
	chat     *httpapi.Client
	models   *httpapi.Client
}

// maxListedModels bounds the models discovery shows from an API's list.
const maxListedModels = 100

func newAPIProvider(s *spec, hs *httpapi.Set) (*apiProvider, error) {
	cfg := s.cfg
	base := strings.TrimRight(cfg.BaseURL, "/")
	u, _ := url.Parse(base) // checked by resolve
	a := &apiProvider{s: s, endpoint: u.Host}
	body := map[string]any{"model": "{model}", "messages": "{messages}", "stream": false}
	if cfg.MaxTokens > 0 {
		body["max_tokens"] = cfg.MaxTokens
	}
	if cfg.Temperature != nil {
		body["temperature"] = *cfg.Temperature
	}
	readOnly := true // asking a model changes nothing: retries are safe
	common := httpapi.ToolConfig{Auth: httpapi.AuthConfig{Bearer: cfg.APIKey}, Allow: cfg.Allow, AllowHTTP: cfg.AllowHTTP,
		Rate: cfg.Rate, ReadOnly: &readOnly, Response: httpapi.ResponseConfig{Format: "json", MaxBytes: cfg.MaxResponseBytes}}
	chat := common
	chat.Name, chat.Description = "consult."+s.name, "Chat completions of the consultation provider "+s.name+"."
	chat.Parameters = map[string]any{"type": "object", "required": []any{"model", "messages"},
		"properties": map[string]any{"model": map[string]any{"type": "string"}, "messages": map[string]any{"type": "array"}}}
	chat.Request = httpapi.RequestConfig{Method: http.MethodPost, URL: base + "/chat/completions", Body: body}
	chat.Retry = cfg.Retry
	models := common
	models.Name, models.Description = "consult."+s.name+".models", "The models list of the consultation provider "+s.name+"."
	models.Request = httpapi.RequestConfig{Method: http.MethodGet, URL: base + "/models"}
	models.Retry = httpapi.RetryConfig{Attempts: 1} // a check, not a consultation
	var err error
	if a.chat, err = hs.Client(chat); err != nil {
		return nil, err
	}
	if a.models, err = hs.Client(models); err != nil {
		return nil, err
	}
	return a, nil
}

// chatMessage is one message of a chat completions request, in the shape
// the request body takes it.
func chatMessage(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func (a *apiProvider) ask(ctx context.Context, q query) outcome {
	msgs := []any{chatMessage("user", q.prompt)}
	if a.s.cfg.System != "" {
		msgs = append([]any{chatMessage("system", a.s.cfg.System)}, msgs...)
	}
	actx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	var n httpapi.Tally
	v, err := a.chat.Do(actx, map[string]any{"model": q.model, "messages": msgs}, &n)
	meta := map[string]any{"endpoint": a.endpoint, "attempts": n.Attempts}
	if n.Waited > 0 {
		meta["waited_ms"] = n.Waited.Milliseconds()
	}
	if err != nil {
		o := a.failed(ctx, actx, err, q.timeout)
		for k, v := range o.meta {
			meta[k] = v
		}
		o.meta = meta
		return o
	}
	raw, ok := v.(json.RawMessage)
	if !ok || len(raw) == 0 {
		return outcome{status: StatusInvalidOutput, err: "the API answered an empty body", meta: meta}
	}
	ans, err := parseChat(raw)
	if ans.finishReason != "" {
		meta["finish_reason"] = ans.finishReason
	}
	if ans.usage != nil {
		meta["usage"] = ans.usage
	}
	switch {
	case errors.Is(err, errChatFailed):
		return outcome{status: StatusError, err: err.Error(), meta: meta}
	case err != nil:
		return outcome{status: StatusInvalidOutput, err: err.Error(), meta: meta}
	}
	if q.emit != nil {
		q.emit(ans.text) // not streamed by the API: the whole answer at once
	}
	return outcome{status: StatusSuccess, output: ans.text, model: ans.model, meta: meta}
}

// failed maps what the Client refused or could not do.
func (a *apiProvider) failed(ctx, actx context.Context, err error, timeout time.Duration) outcome {
	switch {
	case ctx.Err() != nil:
		return ended(ctx)
	case actx.Err() != nil:
		return outcome{status: StatusTimeout, err: fmt.Sprintf("no answer within %v", timeout.Round(time.Millisecond))}
	}
	te, ok := tools.AsError(err)
	if !ok {
		return outcome{status: StatusError, err: err.Error()}
	}
	meta := map[string]any{"error_type": string(te.Kind)}
	if te.Code != "" {
		meta["error_code"] = te.Code
	}
	if te.RetryAfter > 0 {
		meta["retry_after_ms"] = te.RetryAfter.Milliseconds()
	}
	status := StatusError
	if te.Code == tools.CodeInvalidOutput {
		status = StatusInvalidOutput
	}
	return outcome{status: status, err: te.Message, meta: meta}
}

func (a *apiProvider) probe(ctx context.Context, timeout time.Duration) availability {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	av := availability{Installed: true}
	v, err := a.models.Do(pctx, map[string]any{}, &httpapi.Tally{})
	if err != nil {
		if pctx.Err() != nil {
			av.Detail = fmt.Sprintf("GET %s/models did not answer within %v (timeouts.detection)", a.endpoint, timeout)
		} else {
			av.Detail = "GET /models failed: " + err.Error()
		}
		return av
	}
	raw, _ := v.(json.RawMessage)
	if av.Models, err = modelIDs(raw, maxListedModels); err != nil {
		av.Detail = err.Error()
		return av
	}
	av.Working = true
	return av
}

func (a *apiProvider) where() map[string]any {
	return map[string]any{"endpoint": a.endpoint}
}

// upstream reports the endpoint's breaker, as HTTP tools do.
func (a *apiProvider) upstream() tools.Upstream { return a.chat.Upstream() }
