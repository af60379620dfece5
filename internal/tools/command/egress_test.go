package command

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toold/toold/internal/egress"
	"github.com/toold/toold/internal/egress/egresstest"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/launchtest"
)

// TestAllowListInTheResult: a command tool whose sandbox has an
// allow-list reaches its host through the proxy, and a refused
// destination is in the call's data as network.refused (what the
// envelope carries) and in the tool's refused counter.
func TestAllowListInTheResult(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		launchtest.Unavailable(t, "SKIPPED: curl is not installed (apt-get install curl)")
	}
	ca := egresstest.NewCA(t)
	srv := ca.Server(t, "api.test")
	port := strconv.Itoa(srv.Port)
	reg := prometheus.NewRegistry()
	m := egress.NewMetrics(reg)
	for _, mode := range []launch.Mode{launch.ModeNamespaces, launch.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := Config{Tools: []ToolConfig{{Name: "fetch", Description: "d",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"url": map[string]any{"type": "string"}}},
				Argv:       []Arg{{Arg: "curl"}, {Arg: "-sS"}, {Arg: "--fail-with-body"}, {Arg: "{{.url}}"}},
				Sandbox: Sandbox{Sandbox: launch.Sandbox{Network: launch.AllowList(egress.Policy{
					Allow: []string{"api.test:" + port, "127.0.0.1:" + port}, CAFiles: []string{ca.File}})}}}}}
			cfg.Egress = egress.Options{Metrics: m, Resolver: egresstest.Resolver(map[string]string{"api.test": "127.0.0.1", "evil.test": "127.0.0.1"})}
			s, _ := newSet(t, mode, cfg)
			tl := tool(t, s, "fetch")
			if !tl.Spec().Effects.OpenWorld || !strings.Contains(tl.Spec().Containment, "allow-list through toold's egress proxy: api.test:"+port) {
				t.Errorf("the tool's spec: %+v", tl.Spec())
			}
			res, err := call(t, tl, map[string]any{"url": "https://api.test:" + port + "/ok"}, 30*time.Second)
			if err != nil || !res.OK || res.Network == nil || res.Network.Connections != 1 {
				t.Fatalf("allowed: %v %+v", err, res)
			}
			res, err = call(t, tl, map[string]any{"url": "https://evil.test/"}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			if want := `"network":{"connections":0,"bytes":`; !strings.Contains(string(b), want) ||
				!strings.Contains(string(b), `"refused":[{"host":"evil.test","port":443,"reason":"not_allowed","count":1}]`) {
				t.Errorf("the call's data: %s", b)
			}
		})
	}
	if n := testutil.ToFloat64(m.Refused("fetch")); n < 1 {
		t.Errorf("toold_egress_refused_total{tool=\"fetch\"} = %v", n)
	}
}
