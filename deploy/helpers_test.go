package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// toolBin is the toold binary TestMain builds from this module, once.
var toolBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toold-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	toolBin = filepath.Join(dir, "toold")
	helmHome = filepath.Join(dir, "helm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", toolBin, "./cmd/toold")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "deploy: building toold: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// repoRoot is the module root: the directory of `go env GOMOD`, or ".."
// when the go command cannot say.
var repoRoot = sync.OnceValue(func() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err == nil && gomod != "" && gomod != os.DevNull {
		return filepath.Dir(gomod)
	}
	abs, _ := filepath.Abs("..")
	return abs
})

func repoPath(elem ...string) string {
	return filepath.Join(append([]string{repoRoot()}, elem...)...)
}

func readRepoFile(t testing.TB, elem ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(repoPath(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeStrict decodes YAML (or JSON) into v as the API server's strict
// field validation would: duplicate keys and fields v's type does not have
// are errors, and field names match case-sensitively (unlike
// encoding/json, which would accept "containerport").
func decodeStrict(data []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(js, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// kinds maps apiVersion and kind to the Go type a manifest must decode into.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// decodeObject decodes one manifest strictly into its API type.
func decodeObject(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q: not a type this test knows; add it to kinds", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	if err := decodeStrict(data, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// splitYAML splits a multi-document YAML file.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(d []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// manifests are the objects `kubectl apply -k deploy/base` would create.
type manifests struct {
	deployment     *appsv1.Deployment
	service        *corev1.Service
	serviceAccount *corev1.ServiceAccount
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	pdb            *policyv1.PodDisruptionBudget
	netpol         *networkingv1.NetworkPolicy
	serviceMonitor *monitoringv1.ServiceMonitor
	rule           *monitoringv1.PrometheusRule
	configMaps     map[string]*corev1.ConfigMap // by name, as rendered (hash suffix included)
}

// renderBase runs kustomize on deploy/base, as `kubectl apply -k` does, and
// decodes every resulting object strictly into its API type.
func renderBase(t testing.TB) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}}
	for _, obj := range render(t, "deploy", "base") {
		if !m.add(obj) {
			t.Fatalf("deploy/base renders a second %T; the checks assume one of each", obj)
		}
	}
	for name, missing := range map[string]bool{
		"Deployment": m.deployment == nil, "Service": m.service == nil, "ServiceAccount": m.serviceAccount == nil,
		"HorizontalPodAutoscaler": m.hpa == nil, "PodDisruptionBudget": m.pdb == nil, "NetworkPolicy": m.netpol == nil,
		"ServiceMonitor": m.serviceMonitor == nil, "PrometheusRule": m.rule == nil,
	} {
		if missing {
			t.Errorf("deploy/base renders no %s", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

// render runs kustomize on a directory of the repository, as `kubectl
// apply -k` does, and decodes every resulting object strictly into its API
// type.
func render(t testing.TB, dir ...string) []any {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), repoPath(dir...))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", filepath.Join(dir...), err)
	}
	var objs []any
	for _, r := range rm.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeObject(data)
		if err != nil {
			t.Fatalf("rendered %s: %v", r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// add files obj under its kind; false if the kind is already taken.
func (m *manifests) add(obj any) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return m.deployment == nil && assign(&m.deployment, o)
	case *corev1.Service:
		return m.service == nil && assign(&m.service, o)
	case *corev1.ServiceAccount:
		return m.serviceAccount == nil && assign(&m.serviceAccount, o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return m.hpa == nil && assign(&m.hpa, o)
	case *policyv1.PodDisruptionBudget:
		return m.pdb == nil && assign(&m.pdb, o)
	case *networkingv1.NetworkPolicy:
		return m.netpol == nil && assign(&m.netpol, o)
	case *monitoringv1.ServiceMonitor:
		return m.serviceMonitor == nil && assign(&m.serviceMonitor, o)
	case *monitoringv1.PrometheusRule:
		return m.rule == nil && assign(&m.rule, o)
	case *corev1.ConfigMap:
		m.configMaps[o.Name] = o
		return true
	}
	return false // a Secret or another kind has no place in the base
}

func assign[T any](dst **T, v *T) bool { *dst = v; return true }

// container is the Deployment's toold container.
func (m *manifests) container(t testing.TB) *corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the Deployment has %d containers; the checks expect toold alone", len(cs))
	}
	return &cs[0]
}

// containerPort resolves a port given by name or number to the container's
// port number.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}
