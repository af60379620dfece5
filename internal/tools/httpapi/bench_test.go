package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

const issueJSON = `{"number":42,"title":"Crash on start","state":"open","labels":[{"name":"bug"}],"user":{"login":"ada"},"comments":3}`

// BenchmarkHTTPTool calls one loopback API three ways, alternating within
// each iteration so that a noisy machine slows all alike: a bare
// http.Client (request, read, decode the JSON — what any caller does); the
// declared HTTP tool's Execute alone (the request built from the template,
// rates, breaker, the guarded transport, the answer checked); and the same
// tool through toold's whole pipeline (dispatch.Execute: strict decoding,
// schema validation, input sanitizer, bulkhead, deadline, output
// sanitizer, envelope). It reports each arm's mean and the ratios to bare;
// the README quotes them. toold passes the answer on as the result;
// toold_jq shapes it with a jq expression first.
func BenchmarkHTTPTool(b *testing.B) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, issueJSON)
	}))
	b.Cleanup(api.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	bare := func() {
		req, _ := http.NewRequest(http.MethodGet, api.URL+"/repos/acme/toold/issues/42", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct{ name, jq string }{{"toold", ""}, {"toold_jq", "{number, title, state, labels: [.labels[].name]}"}} {
		b.Run(v.name, func(b *testing.B) {
			s, _, _ := build(b, nil, `
tools:
  - name: issue
    description: Reads one issue.
    parameters:
      type: object
      properties: {owner: {type: string}, repo: {type: string}, number: {type: integer, minimum: 1}}
      required: [owner, repo, number]
      additionalProperties: false
    request: {url: "`+api.URL+`/repos/{owner}/{repo}/issues/{number}"}
    response: {jq: '`+v.jq+`'}
    allow: [127.0.0.1]
    allow_http: true
`)
			d := pipeline(b, s)
			args := []byte(`{"owner":"acme","repo":"toold","number":42}`)
			req := &dispatch.Request{Tool: "issue", Body: args, RequestID: "bench"}
			tree, _ := strictjson.Decode(args, 0)
			tl, ctx := s.Tools()[0], context.Background()
			var bareTime, toolTime, tooldTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				bare()
				t1 := time.Now()
				if _, err := tl.Execute(ctx, tools.NewCall(args, "bench", "", nil).WithTree(tree)); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if env := d.Execute(ctx, req); !env.Success {
					b.Fatal(env.Error)
				}
				bareTime, toolTime, tooldTime = bareTime+t1.Sub(t0), toolTime+t2.Sub(t1), tooldTime+time.Since(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(bareTime.Nanoseconds())/n/1000, "bare-µs/op")
			b.ReportMetric(float64(toolTime.Nanoseconds())/n/1000, "tool-µs/op")
			b.ReportMetric(float64(tooldTime.Nanoseconds())/n/1000, "toold-µs/op")
			b.ReportMetric(float64(toolTime)/float64(bareTime), "tool/bare")
			b.ReportMetric(float64(tooldTime)/float64(bareTime), "toold/bare")
		})
	}
}

// BenchmarkOpenBreaker: a call to a tool whose API's breaker is open,
// through the whole pipeline, refused without touching the network.
func BenchmarkOpenBreaker(b *testing.B) {
	u := newUpstream(b, status(500, `{}`))
	s, _, _ := build(b, u, oneTool("GET", "    retry: {attempts: 1}\n")+"breaker: {failures: 1, open_for: 1h}\n")
	d := pipeline(b, s)
	execute(d, "t", `{}`) // opens it
	req := &dispatch.Request{Tool: "t", Body: []byte(`{"id":"x"}`), RequestID: "bench"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if env := d.Execute(ctx, req); env.Error == nil || env.Error.Code != "circuit_open" {
			b.Fatal(env.Error)
		}
	}
	if u.hits.Load() != 1 {
		b.Fatalf("the open breaker let %d requests through", u.hits.Load()-1)
	}
}
