package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kustomize "sigs.k8s.io/kustomize/api/types"
)

// kustomization decodes the kustomization.yaml of a directory of deploy/
// ("base", "nats") strictly.
func kustomization(t testing.TB, dir string) *kustomize.Kustomization {
	t.Helper()
	var k kustomize.Kustomization
	if err := decodeStrict(readRepoFile(t, "deploy", dir, "kustomization.yaml"), &k); err != nil {
		t.Fatalf("deploy/%s/kustomization.yaml: %v", dir, err)
	}
	return &k
}

// A file added to deploy/base and forgotten in kustomization.yaml is never
// applied; one listed but missing breaks `kubectl apply -k`.
func TestKustomizationListsEveryFile(t *testing.T) {
	for _, dir := range []string{"base", "nats"} {
		listsEveryFile(t, dir)
	}
}

func listsEveryFile(t *testing.T, dir string) {
	t.Helper()
	k := kustomization(t, dir)
	listed := []string{"kustomization.yaml"}
	listed = append(listed, k.Resources...)
	for _, g := range k.ConfigMapGenerator {
		for _, src := range g.FileSources {
			_, file, ok := strings.Cut(src, "=") // "key=path" or "path"
			if !ok {
				file = src
			}
			listed = append(listed, file)
		}
	}
	entries, err := os.ReadDir(repoPath("deploy", dir))
	if err != nil {
		t.Fatal(err)
	}
	var present []string
	for _, e := range entries {
		present = append(present, e.Name())
	}
	slices.Sort(listed)
	slices.Sort(present)
	if diff := cmp.Diff(present, listed); diff != "" {
		t.Errorf("deploy/%s files (-present +listed in kustomization.yaml):\n%s", dir, diff)
	}
}

// Every manifest as written (not only as rendered) decodes strictly: the
// base's resources and every example.
func TestManifestsDecodeStrictly(t *testing.T) {
	var files []string
	for _, r := range kustomization(t, "base").Resources {
		files = append(files, filepath.Join("deploy", "base", r))
	}
	examples, err := filepath.Glob(repoPath("deploy", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range examples {
		rel, _ := filepath.Rel(repoRoot(), e)
		files = append(files, rel)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			docs := splitYAML(readRepoFile(t, f))
			if len(docs) == 0 {
				t.Fatal("no manifest in the file")
			}
			for _, d := range docs {
				if _, err := decodeObject(d); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// selects reports whether sel selects objects with the labels l; an empty
// selector, which selects everything, counts as a mistake here.
func selects(t testing.TB, what string, sel *metav1.LabelSelector, l map[string]string) {
	t.Helper()
	if err := selectorMatches(sel, l); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// selectorMatches says why sel does not select objects with the labels l,
// or nil when it does; an empty selector is one reason.
func selectorMatches(sel *metav1.LabelSelector, l map[string]string) error {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return errors.New("empty selector (selects every pod of the namespace)")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return err
	}
	if !s.Matches(labels.Set(l)) {
		return fmt.Errorf("selector %q does not match the labels %v", s, l)
	}
	return nil
}

// mapSelector is a Service's selector as a LabelSelector.
func mapSelector(sel map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: sel}
}

func TestSelectorsMatchLabels(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) { selectorsMatchLabels(t, r.m) })
}

func selectorsMatchLabels(t *testing.T, m *manifests) {
	d := m.deployment
	pod := d.Spec.Template.Labels
	c := m.container(t)

	selects(t, "Deployment .spec.selector", d.Spec.Selector, pod)
	for i, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
		selects(t, fmt.Sprintf("Deployment topologySpreadConstraints[%d]", i), tsc.LabelSelector, pod)
	}
	if len(m.service.Spec.Selector) == 0 {
		t.Error("Service: no selector")
	}
	selects(t, "Service .spec.selector", mapSelector(m.service.Spec.Selector), pod)
	for _, p := range m.service.Spec.Ports {
		if _, ok := containerPort(c, p.TargetPort); !ok {
			t.Errorf("Service port %q: targetPort %s is no port of the container", p.Name, p.TargetPort.String())
		}
	}
	if m.pdb != nil {
		selects(t, "PodDisruptionBudget .spec.selector", m.pdb.Spec.Selector, pod)
	}
	if m.netpol != nil {
		selects(t, "NetworkPolicy .spec.podSelector", &m.netpol.Spec.PodSelector, pod)
		for _, rule := range m.netpol.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil {
					t.Error("NetworkPolicy: an ingress rule opens every port")
				} else if _, ok := containerPort(c, *p.Port); !ok {
					t.Errorf("NetworkPolicy: ingress port %s is no port of the container", p.Port.String())
				}
			}
		}
	}
	if m.hpa != nil {
		checkScaleTarget(t, "HorizontalPodAutoscaler", m.hpa, d)
		if d.Spec.Replicas != nil {
			t.Error("the Deployment sets replicas beside its HorizontalPodAutoscaler: every apply would reset the count")
		}
	} else if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Error("without a HorizontalPodAutoscaler the Deployment needs replicas of 2 or more")
	}
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != m.serviceAccount.Name {
		t.Errorf("Deployment serviceAccountName %q, the base's ServiceAccount is %q", sa, m.serviceAccount.Name)
	}

	if sm := m.serviceMonitor; sm != nil {
		selects(t, "ServiceMonitor .spec.selector", &sm.Spec.Selector, m.service.Labels)
		for _, ep := range sm.Spec.Endpoints {
			if ep.Port == "" || !slices.ContainsFunc(m.service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				t.Errorf("ServiceMonitor endpoint port %q: the Service has no port of that name", ep.Port)
			}
		}
	}

	// The config volume names a ConfigMap the base renders (kustomize
	// rewrote the name with its hash), holding the file -config names.
	if _, _, err := deployedConfig(m); err != nil {
		t.Error(err)
	}
	// A rendered ConfigMap nobody mounts is a mistake, except the
	// dashboard, which Grafana's sidecar picks up by label.
	for name, cm := range m.configMaps {
		if cm.Labels["grafana_dashboard"] != "" {
			continue
		}
		if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == name
		}) {
			t.Errorf("ConfigMap %s is mounted by no volume of the Deployment", name)
		}
	}
}

func checkScaleTarget(t testing.TB, what string, hpa *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment) {
	t.Helper()
	ref := hpa.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("%s scaleTargetRef %s/%s %s, want apps/v1/Deployment %s", what, ref.APIVersion, ref.Kind, ref.Name, d.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
		t.Errorf("%s: minReplicas below 2: one disruption would leave no replica", what)
	}
	for _, mt := range hpa.Spec.Metrics {
		if mt.Type == autoscalingv2.ResourceMetricSourceType && mt.Resource != nil {
			if _, ok := d.Spec.Template.Spec.Containers[0].Resources.Requests[mt.Resource.Name]; !ok {
				t.Errorf("%s scales on %s utilization, but the container requests no %s", what, mt.Resource.Name, mt.Resource.Name)
			}
		}
	}
}

func TestSecurityContext(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) { securityContext(t, r.m) })
}

func securityContext(t *testing.T, m *manifests) {
	spec := m.deployment.Spec.Template.Spec
	c := m.container(t)
	psc, csc := spec.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("the pod and the container both need a securityContext")
	}
	is := func(b *bool) bool { return b != nil && *b }
	uid := cmpOr(csc.RunAsUser, psc.RunAsUser)
	checks := []struct {
		ok   bool
		what string
	}{
		{is(cmpOr(csc.RunAsNonRoot, psc.RunAsNonRoot)), "runAsNonRoot: true"},
		{uid != nil && *uid > 0, "a numeric runAsUser other than 0"},
		{is(csc.ReadOnlyRootFilesystem), "readOnlyRootFilesystem: true"},
		{csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation, "allowPrivilegeEscalation: false"},
		{!is(csc.Privileged), "not privileged"},
		{csc.Capabilities != nil && slices.Contains(csc.Capabilities.Drop, "ALL") && len(csc.Capabilities.Add) == 0,
			"capabilities: drop ALL, add none"},
		{seccomp(csc.SeccompProfile, psc.SeccompProfile), "seccompProfile RuntimeDefault (or Localhost)"},
		{spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken, "automountServiceAccountToken: false"},
		{!spec.HostNetwork && !spec.HostPID && !spec.HostIPC, "no host namespaces"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("securityContext: want %s", ch.what)
		}
	}
	if uid != nil && psc.RunAsUser != nil && csc.RunAsUser != nil && *psc.RunAsUser != *csc.RunAsUser {
		t.Errorf("pod runAsUser %d and container runAsUser %d differ", *psc.RunAsUser, *csc.RunAsUser)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("resources: no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("resources: no memory limit")
	}
	if len(c.Command) > 0 {
		t.Errorf("command %q replaces the image's ENTRYPOINT; give flags as args", c.Command)
	}
	// With a read-only root, every directory toold writes to is a volume:
	// /tmp and the workspace.
	cfg, _ := loadDeployedConfig(t, m)
	for _, dir := range []string{"/tmp", cfg.Workspace} {
		if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == dir && !vm.ReadOnly }) {
			t.Errorf("%s is no writable volume mount; the root filesystem is read-only", dir)
		}
	}
}

func cmpOr[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func seccomp(c, p *corev1.SeccompProfile) bool {
	s := cmpOr(c, p)
	return s != nil && (s.Type == corev1.SeccompProfileTypeRuntimeDefault || s.Type == corev1.SeccompProfileTypeLocalhost)
}

// The kubelet's SIGKILL must not cut the drain short: the termination
// grace covers the preStop sleep, toold's drain grace and the bounds
// cmd/toold's drain keeps after it (5s for cancelled calls to answer, 5s
// for Shutdown).
func TestTerminationGraceOutlastsDrain(t *testing.T) {
	forEachRendering(t, func(t *testing.T, r *rendering) { terminationGraceOutlastsDrain(t, r.m) })
}

func terminationGraceOutlastsDrain(t *testing.T, m *manifests) {
	cfg, _ := loadDeployedConfig(t, m)
	drain := cfg.Server.DrainGrace
	if drain == 0 {
		drain = 30 * time.Second // cmd/toold's defaultDrainGrace
	}
	c := m.container(t)
	if v := envValue(c, "TOOLD_DRAIN_GRACE"); v != "" {
		t.Fatalf("TOOLD_DRAIN_GRACE=%s overrides the config; teach this test to read it", v)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, "drain-grace") }) {
		t.Fatal("-drain-grace in args overrides the config; teach this test to read it")
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil {
		switch {
		case l.PreStop.Sleep != nil:
			preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
		default:
			t.Fatal("preStop other than a sleep action: this test cannot tell how long it takes")
		}
	}
	const finalShutdown = 10 * time.Second
	need := preStop + drain + finalShutdown
	tgp := m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds
	if tgp == nil || time.Duration(*tgp)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %v: must exceed preStop %v + drain_grace %v + %v = %v",
			derefOr(tgp, 30), preStop, drain, finalShutdown, need)
	}
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// The examples must fit the base: the Secret is the one the Deployment
// reads, with the keys it reads; the alternative HPA scales the same
// Deployment.
func TestExamplesFitTheBase(t *testing.T) {
	m := renderBase(t)
	secrets := exampleSecrets(t)
	for _, e := range m.container(t).Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if _, ok := secrets[ref.Name][ref.Key]; !ok && !derefOr(ref.Optional, false) {
			t.Errorf("env %s reads Secret %s key %s, which no example Secret under deploy/examples has", e.Name, ref.Name, ref.Key)
		}
	}
	obj, err := decodeObject(readRepoFile(t, "deploy", "examples", "hpa-queue-depth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	checkScaleTarget(t, "examples/hpa-queue-depth.yaml", hpa, m.deployment)
	if !slices.ContainsFunc(hpa.Spec.Metrics, func(mt autoscalingv2.MetricSpec) bool {
		return mt.Pods != nil && mt.Pods.Metric.Name == "toold_tool_queue_depth"
	}) {
		t.Error("examples/hpa-queue-depth.yaml does not scale on toold_tool_queue_depth")
	}
}

// exampleSecrets reads the Secrets under deploy/examples: name -> key -> value.
func exampleSecrets(t testing.TB) map[string]map[string]string {
	t.Helper()
	files, _ := filepath.Glob(repoPath("deploy", "examples", "*.yaml"))
	out := map[string]map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range splitYAML(data) {
			obj, err := decodeObject(d)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if s, ok := obj.(*corev1.Secret); ok {
				kv := map[string]string{}
				for k, v := range s.Data {
					kv[k] = string(v)
				}
				for k, v := range s.StringData {
					kv[k] = v
				}
				out[s.Name] = kv
			}
		}
	}
	return out
}

// probePort is the container port an HTTP probe targets.
func probePort(t testing.TB, c *corev1.Container, what string, p *corev1.Probe) (path string, port int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Fatalf("%s: want an httpGet probe", what)
	}
	port, ok := containerPort(c, p.HTTPGet.Port)
	if !ok {
		t.Fatalf("%s: port %s is no port of the container", what, p.HTTPGet.Port.String())
	}
	return p.HTTPGet.Path, port
}
