// Package apitest holds toold's HTTP tests to api/openapi.yaml: Checker
// wraps a client transport and fails the test on any response the contract
// does not describe (an undocumented status, a body of the wrong shape, a
// content type the operation does not list). It is used only by tests.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/toold/toold/api"
)

type contract struct {
	doc    *openapi3.T
	router routers.Router
}

var load = sync.OnceValues(func() (*contract, error) {
	openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) // the consent pages
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("loading api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	doc.Servers = nil // match routes whatever port a test server got
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, router: r}, nil
})

// Checker returns a transport that checks every response against the
// contract, reporting violations with t.Errorf.
func Checker(t testing.TB, base http.RoundTripper) http.RoundTripper {
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return &checker{t: t, c: c, base: base}
}

type checker struct {
	t    testing.TB
	c    *contract
	base http.RoundTripper
}

func (k *checker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil // a stream is checked event by event by its own test
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, err
	}
	if verr := k.check(req, resp, body); verr != nil {
		k.t.Errorf("response breaks api/openapi.yaml: %s %s -> %d: %v\nbody: %.500s", req.Method, req.URL.Path, resp.StatusCode, verr, body)
	}
	return resp, nil
}

func (k *checker) check(req *http.Request, resp *http.Response, body []byte) error {
	route, params, err := k.c.router.FindRoute(req)
	if err != nil {
		// No operation: an unknown route or method. The answer must
		// still be an envelope.
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			return fmt.Errorf("no documented operation, and status is not 404/405")
		}
		return k.envelope(body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: resp.StatusCode,
		Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if resp.StatusCode == http.StatusPartialContent {
		// A part of a representation is not the representation: its
		// schema says nothing of the bytes (status and headers are held).
		in.Options.ExcludeResponseBody = true
	}
	in.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

func (k *checker) envelope(body []byte) error { return k.c.schema("Envelope", body) }

func (c *contract) schema(name string, body []byte) error {
	v, err := decode(body)
	if err != nil {
		return err
	}
	ref, ok := c.doc.Components.Schemas[name]
	if !ok {
		return fmt.Errorf("api/openapi.yaml has no schema %q", name)
	}
	return ref.Value.VisitJSON(v)
}

// CheckSchema checks a JSON body (an event of a stream, say) against a
// named schema of the contract.
func CheckSchema(t testing.TB, name string, body []byte) {
	t.Helper()
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.schema(name, body); err != nil {
		t.Errorf("%s breaks schema %s of api/openapi.yaml: %v", body, name, err)
	}
}

func decode(body []byte) (any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return v, nil
}

// Bearer presents token (an API key or an OAuth access token) on every
// request it passes to base (http.DefaultTransport when nil); an empty
// token presents none.
func Bearer(token string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return bearer{token: token, base: base}
}

type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}
