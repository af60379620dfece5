package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ExampleConfig is an example call as an operator writes it in YAML,
// beside a declared tool (command and HTTP tools alike).
type ExampleConfig struct {
	Description string         `yaml:"description"`
	Arguments   map[string]any `yaml:"arguments" validate:"required"`
}

// ExamplesOf converts examples to the contract's form: the arguments as
// compact JSON, numbers as written.
func ExamplesOf(in []ExampleConfig) ([]Example, error) {
	var out []Example
	for i, e := range in {
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(e.Arguments); err != nil {
			return nil, fmt.Errorf("examples[%d]: %w", i, err)
		}
		out = append(out, Example{Description: e.Description, Arguments: bytes.TrimSpace(b.Bytes())})
	}
	return out, nil
}
