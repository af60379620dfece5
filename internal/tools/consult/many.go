package consult

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/toold/toold/internal/tools"
)

// manyIn is consult_many's arguments.
type manyIn struct {
	Prompt      string   `json:"prompt" desc:"The question, with everything the assistants need: they do not see your conversation. Secrets and personal data are redacted before it leaves toold."`
	Providers   []string `json:"providers,omitempty" desc:"The providers to ask; without it, every available one." validate:"omitempty,unique"`
	Synthesize  bool     `json:"synthesize" desc:"Merge the answers that succeeded into one (needs two)." default:"true"`
	FailureType string   `json:"failure_type,omitempty" desc:"The kind of failure being debugged; it chooses each provider's model."`
	Timeout     float64  `json:"timeout,omitempty" desc:"Seconds each provider may take; it can only shorten the configured timeouts." validate:"omitempty,gt=0,lte=3600"`
	Operation   string   `json:"operation,omitempty" desc:"consultation, or review for a longer look (the review timeout applies)." validate:"omitempty,oneof=consultation review"`
}

func (s *Set) manyTool() tools.Tool {
	spec := tools.Spec{
		Name:  "consult_many",
		Title: "Consult several AI assistants",
		Description: "Asks several AI coding assistants the same question in parallel and returns every answer, " +
			"each with its status, and one synthesis of the answers that succeeded.",
		Instructions: "Use it when one opinion is not enough: a hard bug, a risky change, a disagreement to settle. " +
			"Each provider runs within its own slot and timeout; a slow or missing one never fails the others. " +
			"The synthesis needs at least two answers." + shared,
		Returns: "responses (by provider: status, output, error, duration, model, exit_code, metadata), synthesis, " +
			"synthesis_skipped (why not), synthesis_response, total_duration and max_duration (s), success_count, " +
			"failure_count, timestamp, failure_type.",
		Category:   tools.Subtask,
		Parameters: s.parameters(reflect.TypeFor[manyIn](), true),
		Effects:    tools.Effects{ReadOnly: true, Idempotent: true, OpenWorld: true},
		Examples: []tools.Example{{Description: "every available provider, with a synthesis",
			Arguments: json.RawMessage(`{"prompt":"Is this lock-free queue correct? …","failure_type":"exception"}`)}},
	}
	return tools.Typed(spec, s.consultMany)
}

func (s *Set) consultMany(ctx context.Context, call *tools.Call, in manyIn) (MultiResponse, error) {
	start := time.Now()
	if err := s.checkPrompt(in.Prompt); err != nil {
		return MultiResponse{}, err
	}
	ps, err := s.chosen(ctx, in.Providers)
	if err != nil {
		return MultiResponse{}, err
	}
	results := make([]Response, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		model, _ := p.model("", in.FailureType) // configured models are checked at start
		q := query{prompt: in.Prompt, model: model, emit: streamTo(call, p.spec.name),
			timeout: budget(ctx, s.timeoutFor(p, in.Operation, in.Timeout))}
		wg.Go(func() {
			results[i] = p.consult(ctx, q)
			results[i].Metadata["operation"] = operation(in.Operation)
		})
	}
	wg.Wait()
	m := MultiResponse{Responses: map[string]Response{}, Timestamp: stamp(start), FailureType: strPtr(in.FailureType)}
	var answered []Response
	for _, r := range results {
		m.Responses[r.Tool] = r
		m.MaxDuration = max(m.MaxDuration, r.Duration)
		if r.Status == StatusSuccess {
			m.SuccessCount++
			answered = append(answered, r)
		} else {
			m.FailureCount++
		}
	}
	s.synthesize(ctx, call, in, answered, &m)
	m.TotalDuration = seconds(time.Since(start))
	return m, nil
}

// chosen is the providers a call names, or every available one.
func (s *Set) chosen(ctx context.Context, names []string) ([]*provider, error) {
	var ps []*provider
	for _, n := range names { // the schema's enum admits only enabled providers
		ps = append(ps, s.providers[n])
	}
	if len(ps) > 0 {
		return ps, nil
	}
	all := make([]*provider, 0, len(s.providers))
	for _, n := range s.names() {
		all = append(all, s.providers[n])
	}
	var why []string
	for i, a := range s.disc.checkAll(ctx, all, false) {
		if a.usable() {
			ps = append(ps, all[i])
		} else {
			why = append(why, all[i].spec.name+": "+a.Detail)
		}
	}
	if len(ps) == 0 {
		return nil, tools.NewUserError("no provider is available (%s)", strings.Join(why, "; ")).WithCode(tools.CodeNoProvider).
			WithSuggestion("consult_providers shows what is installed and working; ask the operator to install one")
	}
	return ps, nil
}

// synthesize merges the answers that succeeded on the synthesis provider,
// under its own timeout, or says why it did not.
func (s *Set) synthesize(ctx context.Context, call *tools.Call, in manyIn, answered []Response, m *MultiResponse) {
	skip := func(format string, args ...any) { m.SynthesisSkipped = strPtr(fmt.Sprintf(format, args...)) }
	switch {
	case !in.Synthesize:
		skip("not asked (synthesize: false)")
		return
	case len(answered) < 2:
		skip("fewer than two providers answered (%d of %d)", len(answered), len(m.Responses))
		return
	}
	name := s.cfg.Synthesis
	if name == "" {
		name = answered[0].Tool
	}
	p := s.providers[name]
	if p == nil {
		skip("the synthesis provider %s is disabled", name)
		return
	}
	prompt := synthesisPrompt(in.Prompt, answered, p.maxPrompt(s.maxPrompt))
	if s.redact != nil {
		prompt = s.redact(prompt)
	}
	model, _ := p.model("", in.FailureType)
	r := p.consult(ctx, query{prompt: prompt, model: model, emit: streamTo(call, "synthesis"),
		timeout: budget(ctx, s.timeouts.Synthesis)})
	r.Metadata["operation"] = "synthesis"
	m.SynthesisResponse = &r
	if r.Status != StatusSuccess {
		skip("the synthesis by %s ended %s: %s", name, r.Status, deref(r.Error))
		return
	}
	m.Synthesis = &r.Output
}

// maxPrompt is the largest prompt this provider takes: an argument is
// bounded by the kernel; otherwise a synthesis prompt may be four times a
// caller's.
func (p *provider) maxPrompt(callerCap int) int {
	if p.spec.kind == "cli" && p.spec.cfg.Prompt == "arg" {
		return MaxArgPromptBytes
	}
	return min(4*callerCap, 1<<20)
}

// synthesisPrompt asks for one answer from several, each answer cut evenly
// so the whole fits limit bytes.
func synthesisPrompt(question string, answers []Response, limit int) string {
	const intro = "Several AI assistants answered the same question. Merge their answers into one: say what they " +
		"agree on, where they differ and which view is better supported, and end with the recommendation you " +
		"would act on. Answer the question itself; do not describe the assistants.\n\n## Question\n\n"
	const cut = "\n[… cut to fit the synthesis prompt]"
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString(tools.CutUTF8(question, limit/2))
	share := (limit - b.Len()) / len(answers)
	for _, a := range answers {
		head := "\n\n## Answer from " + a.Tool + "\n\n"
		room := share - len(head)
		b.WriteString(head)
		if len(a.Output) > room {
			b.WriteString(tools.CutUTF8(a.Output, max(room-len(cut), 0)) + cut)
		} else {
			b.WriteString(a.Output)
		}
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
