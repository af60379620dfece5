package egress

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/netguard"
	"github.com/toold/toold/internal/tracing"
)

// ServeHTTP answers one request of the run: CONNECT (a tunnel, or TLS
// toold terminates to add a header), or a plain http:// URL forwarded.
// Anything else is not a proxy request.
func (r *Run) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !r.enter() {
		http.Error(w, "toold egress proxy: the run has ended", http.StatusServiceUnavailable)
		return
	}
	defer r.wg.Done()
	if !r.authorized(req) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="toold egress proxy"`)
		http.Error(w, "toold egress proxy: this proxy serves one run; its credentials are in the run's HTTPS_PROXY", http.StatusProxyAuthRequired)
		return
	}
	switch {
	case req.Method == http.MethodConnect:
		r.connect(w, req)
	case req.URL.IsAbs() && req.URL.Scheme == "http":
		r.forward(w, req)
	case req.URL.IsAbs():
		r.refuse(w, req.URL.Hostname(), 0, ReasonBadTarget, http.StatusBadRequest,
			"only http:// URLs are forwarded as they are; an https:// one goes through CONNECT (set HTTPS_PROXY)")
	default:
		r.refuse(w, req.Host, 0, ReasonBadTarget, http.StatusBadRequest,
			"this is toold's egress proxy: send it proxy requests (HTTP_PROXY, HTTPS_PROXY), not requests for itself")
	}
}

// authorized says whether req carries the run's proxy credentials (or
// the run needs none).
func (r *Run) authorized(req *http.Request) bool {
	if r.o.Token == "" {
		return true
	}
	auth, ok := strings.CutPrefix(req.Header.Get("Proxy-Authorization"), "Basic ")
	if !ok {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth))
	return err == nil && subtle.ConstantTimeCompare(got, []byte(proxyUser+":"+r.o.Token)) == 1
}

// span opens the span of one destination, a child of the run's call.
func span(ctx context.Context, method string, t target) (context.Context, trace.Span) {
	return tracing.StartClient(ctx, "egress "+method, semconv.ServerAddress(t.host), semconv.ServerPort(t.port))
}

// endSpan closes a destination's span: allowed or refused, and the bytes
// its connection moved (never a header value).
func endSpan(s trace.Span, reason string, bytes int64) {
	tracing.End(s, reason != "", reason, attribute.Bool("toold.egress.allowed", reason == ""),
		attribute.String("toold.egress.reason", reason), attribute.Int64("toold.egress.bytes", bytes))
}

// connect serves CONNECT host:port.
func (r *Run) connect(w http.ResponseWriter, req *http.Request) {
	t, err := parseTarget(req.Host, 0)
	if err != nil {
		r.refuse(w, req.Host, 0, ReasonBadTarget, http.StatusBadRequest, err.Error())
		return
	}
	ctx, s := span(req.Context(), "CONNECT", t)
	cc := clientConnOf(req)
	before := cc.total()
	reason := r.tunnelOrTerminate(ctx, w, t)
	endSpan(s, reason, cc.total()-before)
}

func (r *Run) tunnelOrTerminate(ctx context.Context, w http.ResponseWriter, t target) string {
	if reason, why := r.admit(t); reason != "" {
		r.refuse(w, t.host, t.port, reason, http.StatusForbidden, why)
		return reason
	}
	inj := r.c.injectFor(t)
	var up net.Conn
	if inj == nil {
		var reason string
		if up, reason = r.dialFor(ctx, w, t); up == nil {
			return reason
		}
	}
	conn, buffered, err := hijack(w)
	if err != nil {
		if up != nil {
			_ = up.Close()
		}
		return "hijack"
	}
	if !r.track(conn) {
		if up != nil {
			_ = up.Close()
		}
		return ""
	}
	defer r.untrack(conn)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		if up != nil {
			_ = up.Close()
		}
		return ""
	}
	if inj == nil {
		r.tunnel(ctx, &prefixedConn{Conn: conn, r: buffered}, up)
		return ""
	}
	r.terminate(ctx, &prefixedConn{Conn: conn, r: buffered}, t)
	return ""
}

// dialFor connects to t through the guard of its port, answering the run
// when that fails: 403 when the guard refuses (an allowed name on an
// address the list does not name), 502 when the network does.
func (r *Run) dialFor(ctx context.Context, w http.ResponseWriter, t target) (net.Conn, string) {
	up, err := r.dial(ctx, "tcp", t.String())
	var re *netguard.RefusedError
	switch {
	case errors.As(err, &re):
		r.refuse(w, t.host, t.port, ReasonPrivateAddress, http.StatusForbidden, re.Reason)
		return nil, ReasonPrivateAddress
	case err != nil:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "toold egress proxy: %s is allowed but could not be reached: %v\n", t, errText(err))
		return nil, "unreachable"
	}
	return up, ""
}

// errText is a network error without the addresses toold dialed from.
func errText(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "cannot resolve " + dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// dial connects to address (host:port) through the outbound guard of
// its port.
func (r *Run) dial(ctx context.Context, network, address string) (net.Conn, error) {
	_, p, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(p)
	if r.c.dialHook != nil {
		if err := r.c.dialHook(address); err != nil {
			return nil, err
		}
	}
	g, ok := r.c.guards[port]
	if !ok {
		return nil, &netguard.RefusedError{Target: address, Reason: "no allow-list entry names this port"}
	}
	return g.DialContext(ctx, network, address)
}

// tunnel copies both ways until either side ends or the run does.
func (r *Run) tunnel(ctx context.Context, client, up net.Conn) {
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	stop := context.AfterFunc(ctx, func() { _ = client.Close(); _ = up.Close() })
	defer stop()
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(up, client)
	go half(client, up)
	wg.Wait()
}

// terminate serves HTTPS requests for t's host on client with the run's
// authority, adding the host's header to each and redacting its value from
// each response.
func (r *Run) terminate(ctx context.Context, client net.Conn, t target) {
	cert, err := r.ca.leaf(t)
	if err != nil {
		return
	}
	tc := tls.Server(client, &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12})
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return
	}
	one := newOneConn(tc)
	srv := &http.Server{Handler: r.injecting(t), BaseContext: func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: log.New(io.Discard, "", 0), ConnState: one.state}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	_ = srv.Serve(one)
	<-one.done
}

// injecting is the handler of requests inside a terminated tunnel to t.
func (r *Run) injecting(t target) http.Handler {
	inj := r.c.injectFor(t)
	rp := &httputil.ReverseProxy{Transport: r.tls, ErrorLog: log.New(io.Discard, "", 0),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", t.authority(443)
			pr.Out.Host = ""
			// Go's transport asks for gzip itself and decompresses, so the
			// redactor reads the body as sent.
			pr.Out.Header.Del("Accept-Encoding")
			v := pr.Out.Context().Value(valueKey{}).(*injected)
			pr.Out.Header.Del(inj.header)
			pr.Out.Header.Set(inj.header, v.value)
		},
		ModifyResponse: func(resp *http.Response) error {
			v := resp.Request.Context().Value(valueKey{}).(*injected)
			if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
				return fmt.Errorf("the response is %s-encoded, which toold cannot redact", ce)
			}
			redactHeader(resp.Header, v.secrets)
			if n := resp.ContentLength; n >= 0 && n <= wholeBody {
				// A body of known, small length is redacted whole and sent
				// with its new length, in one write.
				b, err := io.ReadAll(io.LimitReader(resp.Body, n))
				_ = resp.Body.Close()
				if err != nil {
					return err
				}
				b = redactAll(b, v.secrets)
				resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
				resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
				return nil
			}
			// Else it streams, redacted across reads (flushed as it comes:
			// its length is no longer known).
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			resp.Body = readCloser{newRedactor(resp.Body, v.secrets), resp.Body}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			var re *netguard.RefusedError
			if errors.As(err, &re) {
				r.refuse(w, t.host, t.port, ReasonPrivateAddress, http.StatusForbidden, re.Reason)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "toold egress proxy: %s: %s\n", t, errText(err))
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.enter() {
			http.Error(w, "toold egress proxy: the run has ended", http.StatusServiceUnavailable)
			return
		}
		defer r.wg.Done()
		if h, err := parseTarget(req.Host, t.port); err != nil || h.host != t.host || h.port != t.port {
			r.refuse(w, t.host, t.port, ReasonHostMismatch, http.StatusMisdirectedRequest,
				fmt.Sprintf("this connection is to %s; a request for %q must open its own", t, req.Host))
			return
		}
		if req.Header.Get("Upgrade") != "" {
			r.refuse(w, t.host, t.port, ReasonUpgrade, http.StatusForbidden,
				"a protocol upgrade would carry responses toold cannot redact")
			return
		}
		v := r.valueOf(req.Context(), inj)
		if v.reason != "" {
			r.refuse(w, t.host, t.port, v.reason, http.StatusForbidden, v.detail)
			return
		}
		rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), valueKey{}, v)))
	})
}

type valueKey struct{}

// wholeBody is the largest response body of known length redacted whole
// rather than streamed.
const wholeBody = 1 << 20

// authority is t as a URL's host: the port left out when it is def.
func (t target) authority(def int) string {
	h := t.host
	if t.addr.Is6() {
		h = "[" + h + "]"
	}
	if t.port == def {
		return h
	}
	return h + ":" + strconv.Itoa(t.port)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// valueOf resolves an injection's value for this run, once: ${user:NAME}
// through the run's Resolver, at the first request that needs it.
func (r *Run) valueOf(ctx context.Context, inj *compiledInject) *injected {
	idx := inj.idx
	r.mu.Lock()
	v, ok := r.values[idx]
	r.mu.Unlock()
	if ok {
		return v
	}
	v = r.resolve(ctx, inj)
	r.mu.Lock()
	if prev, ok := r.values[idx]; ok {
		v = prev
	} else if v.reason == "" {
		r.values[idx] = v
	}
	r.mu.Unlock()
	return v
}

func (r *Run) resolve(ctx context.Context, inj *compiledInject) *injected {
	var b strings.Builder
	var secrets [][]byte
	for _, p := range inj.parts {
		if p.credential == "" {
			b.WriteString(p.text)
			continue
		}
		if r.o.Credentials == nil {
			return &injected{reason: ReasonCredential, detail: fmt.Sprintf("${user:%s} needs the calling principal's credentials, and this run has none", p.credential)}
		}
		val, err := r.o.Credentials(ctx, p.credential)
		switch {
		case errors.Is(err, ErrNoCredential):
			return &injected{reason: ReasonNoCredential, detail: fmt.Sprintf("the caller has not set the credential %q (PUT /credentials/%s)", p.credential, p.credential)}
		case errors.Is(err, credentials.ErrAnonymous):
			return &injected{reason: ReasonCredential, detail: err.Error()}
		case err != nil:
			return &injected{reason: ReasonCredential, detail: fmt.Sprintf("the credential %q could not be read", p.credential)}
		case !httpguts.ValidHeaderFieldValue(string(val)):
			return &injected{reason: ReasonCredential, detail: fmt.Sprintf("the credential %q holds a line break or a control character: set it again without them (PUT /credentials/%s)", p.credential, p.credential)}
		}
		secrets = append(secrets, val)
		b.Write(val)
	}
	v := b.String()
	return &injected{value: v, secrets: append(secretsOf(v), secrets...)}
}

// forward serves a plain http:// request.
func (r *Run) forward(w http.ResponseWriter, req *http.Request) {
	t, err := parseTarget(req.URL.Host, 80)
	if err != nil {
		r.refuse(w, req.URL.Host, 0, ReasonBadTarget, http.StatusBadRequest, err.Error())
		return
	}
	ctx, s := span(req.Context(), req.Method, t)
	reason := ""
	defer func() { endSpan(s, reason, 0) }()
	if r.c.injectFor(t) != nil {
		reason = ReasonPlainHTTP
		r.refuse(w, t.host, t.port, reason, http.StatusForbidden,
			"toold adds a credential for this host over https only; use https://")
		return
	}
	if reason, why := r.admit(t); reason != "" {
		r.refuse(w, t.host, t.port, reason, http.StatusForbidden, why)
		return
	}
	rp := &httputil.ReverseProxy{Transport: r.plain, ErrorLog: log.New(io.Discard, "", 0),
		Rewrite: func(pr *httputil.ProxyRequest) { pr.Out.Host = "" },
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			var re *netguard.RefusedError
			if errors.As(err, &re) {
				reason = ReasonPrivateAddress
				r.refuse(w, t.host, t.port, reason, http.StatusForbidden, re.Reason)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "toold egress proxy: %s is allowed but could not be reached: %s\n", t, errText(err))
		}}
	rp.ServeHTTP(w, req.WithContext(ctx))
}

// transport reaches the real servers: through the guards, verifying TLS
// with the system's roots and ca_files, never through another proxy.
func (r *Run) transport(tlsToo bool) *http.Transport {
	t := &http.Transport{DialContext: r.dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, MaxResponseHeaderBytes: 1 << 20, ExpectContinueTimeout: time.Second}
	if tlsToo {
		t.TLSClientConfig = &tls.Config{RootCAs: r.c.roots, MinVersion: tls.VersionTLS12}
		t.ForceAttemptHTTP2 = true
	}
	return t
}
