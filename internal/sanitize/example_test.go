package sanitize_test

import (
	"context"
	"fmt"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

func ExampleSanitizer_Output() {
	s, _ := sanitize.New(sanitize.Config{}, nil) // the zero Config: safe defaults
	spec := &tools.Spec{Name: "run_command", Category: tools.SystemCommand}
	out, rep, _ := s.Output(context.Background(), spec, []byte(`{"stdout":"\u001b[32mok\u001b[0m AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY\n"}`))
	fmt.Println(string(out))
	fmt.Println(rep.Redactions, rep.ByKind)
	// Output:
	// {"stdout":"ok AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]\n"}
	// 1 map[aws_secret_access_key:1]
}

func ExampleSanitizer_RedactString() {
	s, _ := sanitize.New(sanitize.Config{}, nil)
	// For debug logs: every enabled kind, whatever the tool's output modes.
	fmt.Println(s.RedactString("http_get", `curl -H "Authorization: Bearer 8f2a9c4e1b7d3f6a0c5e" https://ops:hunter22@api.example.org/v1?card=4111111111111111`))
	// Output:
	// curl -H "Authorization: Bearer [REDACTED:bearer_token]" https://ops:[REDACTED:url_password]@api.example.org/v1?card=[REDACTED:payment_card]
}

func ExampleSanitizer_Input() {
	s, _ := sanitize.New(sanitize.Config{Tools: map[string]sanitize.Policy{
		"http_post": {Input: sanitize.InputPolicy{Secrets: "block"}},
	}}, nil)
	spec := &tools.Spec{Name: "http_post", Category: tools.ExternalAPI}
	_, _, err := s.Input(context.Background(), spec, map[string]any{"body": "token ghp_aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3"})
	te, _ := tools.AsError(err)
	fmt.Println(te.Kind, te.Code, te.Fields[0].Pointer)
	fmt.Println(te.Message)
	// Output:
	// security_error secret_blocked /body
	// the arguments carry secrets (github_token at /body), which this tool refuses
}
