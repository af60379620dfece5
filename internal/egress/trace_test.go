package egress

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toold/toold/internal/egress/egresstest"
)

// TestSpanPerDestination: each destination a run asks for is a span,
// a child of the call's: host, port, allowed or refused with the reason,
// bytes; never a header's value.
func TestSpanPerDestination(t *testing.T) {
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	const secret = "span-secret-0123456789"
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, call := tp.Tracer("test").Start(context.Background(), "call")
	c, err := Compile(Policy{Allow: []string{"api.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File},
		Inject: []Inject{{Host: "api.test", Header: "Authorization", Value: "Bearer " + secret}}},
		Options{Resolver: egresstest.Resolver(map[string]string{"api.test": "127.0.0.1"})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.NewRun(ctx, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Serve(ln)
	f := &fixture{run: r, proxy: mustURL("http://" + ln.Addr().String())}
	cl := f.client(x509Pool(t, r.Bundle()))
	if code, body := get(cl, "https://api.test:"+port+"/"); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	get(cl, "https://evil.test/")
	r.Close()
	call.End()
	var egress []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "egress ") {
			egress = append(egress, s)
		}
	}
	if len(egress) != 2 {
		t.Fatalf("%d egress spans", len(egress))
	}
	for _, s := range egress {
		if s.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("%s is not the call's child", s.Name())
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
			if strings.Contains(a.Value.Emit(), secret) {
				t.Errorf("%s carries the secret in %s", s.Name(), a.Key)
			}
		}
		switch attrs["server.address"] {
		case "api.test":
			if attrs["toold.egress.allowed"] != "true" || attrs["toold.egress.bytes"] == "0" || attrs["server.port"] != port {
				t.Errorf("allowed span: %v", attrs)
			}
		case "evil.test":
			if attrs["toold.egress.allowed"] != "false" || attrs["toold.egress.reason"] != ReasonNotAllowed {
				t.Errorf("refused span: %v", attrs)
			}
		default:
			t.Errorf("span %v", attrs)
		}
	}
}
