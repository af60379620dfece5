package executions

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/toold/toold/internal/tools"
)

// FuzzCheckAnswer: an answer is accepted only as JSON that fits what the
// tool asked — one of its choices, or a value its schema holds.
func FuzzCheckAnswer(f *testing.F) {
	for _, s := range []string{`"red"`, `"green"`, `3`, `0`, `3.5`, `null`, `{"a":1}`, `"re`, `"\ud800"`, `[1,2]`, `"red" "blue"`} {
		f.Add([]byte(s))
	}
	waiting := func(req string) *Record {
		return &Record{ID: "0123456789abcdef01234567", Tool: "request_user_input", Wait: &Wait{For: tools.WaitInput, Request: json.RawMessage(req)}}
	}
	choices := waiting(`{"prompt":"colour?","choices":["red","blue"]}`)
	schema := waiting(`{"prompt":"how many?","schema":{"type":"integer","minimum":1,"maximum":9}}`)
	free := waiting(`{"prompt":"anything?"}`)
	f.Fuzz(func(t *testing.T, answer []byte) {
		if checkAnswer(free, tools.WaitInput, answer) == nil && !json.Valid(answer) {
			t.Errorf("%q: accepted an answer that is not JSON", answer)
		}
		if checkAnswer(choices, tools.WaitInput, answer) == nil {
			var s string
			if err := json.Unmarshal(answer, &s); err != nil || !slices.Contains([]string{"red", "blue"}, s) {
				t.Errorf("%q: accepted against the choices", answer)
			}
		}
		if checkAnswer(schema, tools.WaitInput, answer) == nil {
			var n float64
			if err := json.Unmarshal(answer, &n); err != nil || n != float64(int(n)) || n < 1 || n > 9 {
				t.Errorf("%q: accepted against the schema", answer)
			}
		}
		if checkAnswer(schema, tools.WaitSubtask, answer) == nil {
			t.Errorf("%q: accepted as a subtask's result by an input request", answer)
		}
	})
}
