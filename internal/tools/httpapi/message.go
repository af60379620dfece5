package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// maxMessage bounds how much of an API's own error message reaches the
// model.
const maxMessage = 300

// apiMessage finds what an error answer says, as ": message", or "": the
// usual fields of JSON error bodies (message, error, error_description,
// detail, title, errors[0]), else the text itself, never an HTML page.
// The result is one line, bounded, valid UTF-8; the pipeline's sanitizer
// redacts it like every message.
func apiMessage(ans *answer) string {
	mt, _, _ := mime.ParseMediaType(ans.header.Get("Content-Type"))
	if strings.Contains(mt, "html") || len(ans.body) == 0 {
		return ""
	}
	msg := ""
	if v, err := strictjson.Decode(ans.body, 32); err == nil {
		msg = jsonMessage(v)
	} else if !strings.Contains(mt, "json") {
		msg = string(ans.body)
	}
	msg = oneLine(msg)
	if msg == "" || strings.EqualFold(msg, http.StatusText(ans.status)) {
		return "" // the status line says it already
	}
	return ": " + msg
}

func jsonMessage(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		var parts []string
		for _, k := range []string{"message", "error", "error_description", "detail", "title"} {
			if s := jsonMessage(v[k]); s != "" {
				parts = append(parts, s)
				break
			}
		}
		if errs, ok := v["errors"].([]any); ok && len(errs) > 0 {
			if s := jsonMessage(errs[0]); s != "" {
				parts = append(parts, s)
			} else if m, ok := errs[0].(map[string]any); ok {
				parts = append(parts, fieldProblem(m))
			}
		}
		return strings.Join(parts, ": ")
	}
	return ""
}

// fieldProblem renders an error object without a message, such as
// GitHub's {"resource": "Search", "field": "q", "code": "missing"}.
func fieldProblem(m map[string]any) string {
	var parts []string
	for _, k := range []string{"resource", "field", "code"} {
		if s, ok := m[k].(string); ok && s != "" {
			parts = append(parts, k+" "+s)
		}
	}
	return strings.Join(parts, ", ")
}

// oneLine collapses whitespace and bounds the length at a rune boundary.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if len(s) <= maxMessage {
		return s
	}
	return tools.CutUTF8(s, maxMessage) + "…"
}

// snippet shows how a body that should have been JSON begins.
func snippet(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	s := oneLine(string(body[:min(len(body), 80)]))
	return fmt.Sprintf(" (it begins %q)", s)
}
