package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toold/toold/internal/testpeer"
)

// helmHome holds Helm's cache, config and data directories for the tests
// (TestMain sets it): nothing of the user's Helm setup (repositories,
// plugins) takes part.
var helmHome string

// helmBin is Helm: TOOLD_HELM, else helm on PATH; else the test skips
// saying how to build it, or fails where TOOLD_REQUIRE_HELM=1 (.ci/run).
func helmBin(t testing.TB) string {
	t.Helper()
	return testpeer.Binary(t, "TOOLD_HELM", "helm", "TOOLD_REQUIRE_HELM",
		"no helm for the chart's tests: build it from its Go module with "+
			`(cd test/helm && go build -o "$(go env GOPATH)/bin/helm" helm.sh/helm/v4/cmd/helm), or set TOOLD_HELM`)
}

// haveHelm reports whether helmBin finds Helm, without ending the test.
func haveHelm() bool {
	if os.Getenv("TOOLD_HELM") != "" {
		return true
	}
	_, err := exec.LookPath("helm")
	return err == nil
}

// chartPath is a path inside deploy/helm/toold.
func chartPath(elem ...string) string {
	return repoPath(append([]string{"deploy", "helm", "toold"}, elem...)...)
}

// chartValueFiles are the chart's ci/*.yaml, relative to the chart.
func chartValueFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(chartPath("ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/helm/toold/ci has no values files (%v)", err)
	}
	for i, f := range files {
		files[i] = filepath.Join("ci", filepath.Base(f))
	}
	slices.Sort(files)
	return files
}

// runHelm runs helm with args in the chart's directory, with its homes in
// helmHome, and returns its combined output.
func runHelm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	bin := helmBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = chartPath()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG="+filepath.Join(helmHome, "no-kubeconfig"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// chartRelease is the release name the tests render: the one that gives
// deploy/base's names.
const chartRelease = "toold"

// helmTemplate runs `helm template` of the chart with args (-f FILE,
// --set ...).
func helmTemplate(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	return runHelm(t, append([]string{"template", chartRelease, ".", "--namespace", "tools"}, args...)...)
}

// TestChartLint: `helm lint --strict` (warnings fail too, values checked
// against values.schema.json) with the defaults and with each ci/ file.
func TestChartLint(t *testing.T) {
	helmBin(t)
	for _, f := range append([]string{""}, chartValueFiles(t)...) {
		name := f
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", "."}
			if f != "" {
				args = append(args, "-f", f)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Errorf("helm lint --strict printed no verdict:\n%s", out)
			}
			checkNotes(t, f)
		})
	}
}

// checkNotes: what `helm install` prints (NOTES.txt) renders, and names
// every Secret key the pods need before they can start: each the
// Deployment reads and does not mark optional, and the audit key, which
// toold on a shared store refuses to start without.
func checkNotes(t *testing.T, valuesFile string) {
	t.Helper()
	args := []string{"install", chartRelease, ".", "--dry-run=client", "--namespace", "tools"}
	if valuesFile != "" {
		args = append(args, "-f", valuesFile)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	_, notes, ok := bytes.Cut(out, []byte("\nNOTES:\n"))
	if !ok {
		t.Fatalf("helm install --dry-run printed no NOTES:\n%.2000s", out)
	}
	r := renderChart(t, valuesFile)
	for _, e := range r.m.container(t).Env {
		ref := envSecret(r.m.container(t), e.Name)
		if ref == nil || (derefOr(ref.Optional, false) && e.Name != "TOOLD_AUDIT_SIGNING_KEY") {
			continue
		}
		if want := ref.Name + ": " + ref.Key; !bytes.Contains(notes, []byte(want)) {
			t.Errorf("NOTES do not name the Secret key %q (%s):\n%s", want, e.Name, notes)
		}
	}
}

// chartRendering is the chart rendered with one set of values, decoded.
type chartRendering struct {
	m    *manifests
	nats *natsManifests // nil with nats.enabled=false
}

var (
	chartRenderingsMu sync.Mutex
	chartRenderings   = map[string]*chartRendering{}
)

// renderChart runs `helm template` with the values file (none: the
// defaults) and decodes every object strictly into its API type: toold's
// objects into a manifests, the bundled NATS cluster's into a
// natsManifests. Renderings are kept for the process: the tests only read
// them.
func renderChart(t testing.TB, valuesFile string) *chartRendering {
	t.Helper()
	chartRenderingsMu.Lock()
	defer chartRenderingsMu.Unlock()
	if r, ok := chartRenderings[valuesFile]; ok {
		return r
	}
	var args []string
	if valuesFile != "" {
		args = []string{"-f", valuesFile}
	}
	out, err := helmTemplate(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &chartRendering{m: &manifests{configMaps: map[string]*corev1.ConfigMap{}}}
	var natsObjs []any
	for _, d := range splitYAML(out) {
		obj, err := decodeObject(d)
		if err != nil {
			t.Fatalf("helm template %s: %v\n%s", valuesFile, err, d)
		}
		if obj.(metav1.Object).GetLabels()["app.kubernetes.io/name"] == "nats" {
			natsObjs = append(natsObjs, obj)
			continue
		}
		if !r.m.add(obj) {
			t.Fatalf("helm template %s renders a second %T, or one with no place in toold's objects", valuesFile, obj)
		}
	}
	m := r.m
	for kind, missing := range map[string]bool{"Deployment": m.deployment == nil, "Service": m.service == nil,
		"ServiceAccount": m.serviceAccount == nil, "ConfigMap": len(m.configMaps) == 0} {
		if missing {
			t.Fatalf("helm template %s renders no %s of toold", valuesFile, kind)
		}
	}
	if len(natsObjs) > 0 {
		r.nats = collectNATS(t, natsObjs, false)
	}
	chartRenderings[valuesFile] = r
	return r
}

// rendering is one way this package deploys toold: deploy/base beside
// deploy/nats, or the chart with a set of values.
type rendering struct {
	name string
	m    *manifests
	nats *natsManifests // the NATS cluster deployed with it; nil: an external one
	base bool           // deploy/base, whose examples fit it
}

// forEachRendering runs check on deploy/base and on the chart with its
// defaults and with each ci/ file, each a subtest; the chart's subtests
// skip (or fail, TOOLD_REQUIRE_HELM=1) without helm.
func forEachRendering(t *testing.T, check func(t *testing.T, r *rendering)) {
	t.Run("deploy/base", func(t *testing.T) {
		check(t, &rendering{name: "deploy/base", m: renderBase(t), nats: renderNATS(t), base: true})
	})
	if !haveHelm() {
		t.Run("chart", func(t *testing.T) { helmBin(t) })
		return
	}
	for _, f := range append([]string{""}, chartValueFiles(t)...) {
		name := "chart"
		if f != "" {
			name += " " + f
		}
		t.Run(name, func(t *testing.T) {
			r := renderChart(t, f)
			check(t, &rendering{name: name, m: r.m, nats: r.nats})
		})
	}
}

// collectNATS files the objects of a NATS cluster; the NetworkPolicy is
// required where needPolicy.
func collectNATS(t testing.TB, objs []any, needPolicy bool) *natsManifests {
	t.Helper()
	m := &natsManifests{}
	for _, obj := range objs {
		m.objects++
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			m.sts = o
		case *corev1.Service:
			m.svc = o
		case *policyv1.PodDisruptionBudget:
			m.pdb = o
		case *networkingv1.NetworkPolicy:
			m.netpol = o
		case *corev1.ConfigMap:
			m.config = o
		default:
			t.Fatalf("the NATS cluster renders a %T; the checks know none", o)
		}
	}
	if m.sts == nil || m.svc == nil || m.pdb == nil || m.config == nil || (needPolicy && m.netpol == nil) {
		t.Fatalf("the NATS cluster renders %d objects, not one StatefulSet, Service, PDB, ConfigMap (and NetworkPolicy)", m.objects)
	}
	return m
}
