package consult

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// chatAnswer is what an OpenAI-compatible chat completion answered.
type chatAnswer struct {
	text         string
	model        string
	finishReason string
	usage        map[string]any
}

// errChatFailed marks an answer that is a well-formed failure report (an
// "error" object), as opposed to one that cannot be read.
var errChatFailed = errors.New("the API reported a failure")

// parseChat reads a chat completion: choices[0].message.content as text
// (or the text parts of a content array), the model that answered, why
// it stopped, and the token usage. A body that is an error report wraps
// errChatFailed; anything else unreadable is an error of its own.
func parseChat(body []byte) (chatAnswer, error) {
	doc, err := strictjson.Decode(body, maxJSONDepth)
	if err != nil {
		return chatAnswer{}, fmt.Errorf("the API's answer is not JSON: %v (it begins %q)", err, tools.CutUTF8(string(body), 60))
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return chatAnswer{}, fmt.Errorf("the API answered %s, not a chat completion object", kindOf(doc))
	}
	if ev, ok := obj["error"]; ok && truthy(ev) {
		return chatAnswer{}, fmt.Errorf("%w: %s", errChatFailed, errorMessage(ev, nil))
	}
	var a chatAnswer
	a.model, _ = obj["model"].(string)
	a.usage = usageOf(obj["usage"])
	choices, _ := obj["choices"].([]any)
	if len(choices) == 0 {
		return a, errors.New("the API's answer has no choices")
	}
	first, _ := choices[0].(map[string]any)
	a.finishReason, _ = first["finish_reason"].(string)
	msg, _ := first["message"].(map[string]any)
	if msg == nil {
		return a, errors.New("the API's first choice has no message")
	}
	text, err := contentText(msg["content"])
	if err != nil {
		return a, err
	}
	if strings.TrimSpace(text) == "" {
		if refusal, _ := msg["refusal"].(string); refusal != "" {
			return a, fmt.Errorf("%w: the model refused: %s", errChatFailed, bound(refusal))
		}
		return a, fmt.Errorf("the model's answer is empty (finish_reason %q)", a.finishReason)
	}
	a.text = strings.TrimSpace(text)
	return a, nil
}

// contentText is a message's content: a string, or an array of parts
// whose text parts are joined.
func contentText(c any) (string, error) {
	switch x := c.(type) {
	case string:
		return x, nil
	case nil:
		return "", nil
	case []any:
		var b strings.Builder
		for _, part := range x {
			p, _ := part.(map[string]any)
			if t, ok := p["text"].(string); ok && (p["type"] == "text" || p["type"] == nil) {
				b.WriteString(t)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("the message's content is %s, not text", kindOf(c))
}

// usageOf keeps the numeric token counts of a usage object.
func usageOf(u any) map[string]any {
	m, _ := u.(map[string]any)
	out := map[string]any{}
	for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
		if n, ok := m[k].(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				out[k] = i
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// modelIDs reads the ids of a /models answer ({"data": [{"id"}]}), at
// most max of them.
func modelIDs(body []byte, max int) ([]string, error) {
	doc, err := strictjson.Decode(body, maxJSONDepth)
	if err != nil {
		return nil, fmt.Errorf("the models list is not JSON: %v", err)
	}
	obj, _ := doc.(map[string]any)
	data, ok := obj["data"].([]any)
	if !ok {
		return nil, errors.New(`the models list has no "data" array`)
	}
	var ids []string
	for _, d := range data {
		if m, ok := d.(map[string]any); ok {
			if id, ok := m["id"].(string); ok && id != "" && len(ids) < max {
				ids = append(ids, tools.CutUTF8(id, 200))
			}
		}
	}
	return ids, nil
}
