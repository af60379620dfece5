package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// quantities compares resource quantities by value (their cached string
// is no part of it).
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// TestChartMatchesKustomize: with its defaults (and the monitoring objects
// deploy/base has) the chart renders what `kubectl apply -k deploy/base`
// and `kubectl apply -k deploy/nats` do, so the two cannot drift: the pod
// (containers, probes, security contexts, ports, env, volumes), every
// other object's spec, the config toold reads, the dashboard, and the
// NATS cluster with its configuration. What differs on purpose is
// normalised first, and each difference is checked: the ConfigMaps' names
// (kustomize adds a content hash, so a change rolls the pods; the chart
// keeps one name and passes -watch) and the labels Helm adds.
func TestChartMatchesKustomize(t *testing.T) {
	helmBin(t)
	chart := renderChart(t, filepath.Join("ci", "monitoring-values.yaml"))
	base, baseNATS := renderBase(t), renderNATS(t)
	if chart.nats == nil {
		t.Fatal("the chart's defaults render no NATS cluster")
	}

	// The Deployment: everything of its spec.
	cd, bd := chart.m.deployment.DeepCopy(), base.deployment.DeepCopy()
	cc := &cd.Spec.Template.Spec.Containers[0]
	if !slices.Contains(cc.Args, "-watch") {
		t.Errorf("the chart's args %q have no -watch: a ConfigMap change would be neither reloaded nor rolled", cc.Args)
	}
	cc.Args = slices.DeleteFunc(cc.Args, func(a string) bool { return a == "-watch" })
	for _, d := range []*appsv1.Deployment{cd, bd} {
		for i := range d.Spec.Template.Spec.Volumes {
			if v := &d.Spec.Template.Spec.Volumes[i]; v.ConfigMap != nil {
				v.ConfigMap.Name = "CONFIG"
			}
		}
	}
	if got, want := cc.Image, "toold:"+chartAppVersion(t); got != want {
		t.Errorf("the chart's image %q, want %q (its appVersion)", got, want)
	}
	cc.Image = bd.Spec.Template.Spec.Containers[0].Image
	if diff := cmp.Diff(bd.Spec, cd.Spec, quantities); diff != "" {
		t.Errorf("Deployment spec (-deploy/base +chart):\n%s", diff)
	}
	specs := []struct {
		what        string
		base, chart any
	}{
		{"Service", base.service.Spec, chart.m.service.Spec},
		{"ServiceAccount automountServiceAccountToken", base.serviceAccount.AutomountServiceAccountToken, chart.m.serviceAccount.AutomountServiceAccountToken},
		{"HorizontalPodAutoscaler", base.hpa.Spec, specOf(chart.m.hpa)},
		{"PodDisruptionBudget", base.pdb.Spec, specOf(chart.m.pdb)},
		{"NetworkPolicy", base.netpol.Spec, specOf(chart.m.netpol)},
		{"ServiceMonitor", base.serviceMonitor.Spec, specOf(chart.m.serviceMonitor)},
		{"PrometheusRule", base.rule.Spec, specOf(chart.m.rule)},
		{"NATS Service", baseNATS.svc.Spec, chart.nats.svc.Spec},
		{"NATS PodDisruptionBudget", baseNATS.pdb.Spec, chart.nats.pdb.Spec},
		{"NATS NetworkPolicy", baseNATS.netpol.Spec, specOf(chart.nats.netpol)},
		{"NATS ConfigMap", baseNATS.config.Data, chart.nats.config.Data},
	}
	for _, s := range specs {
		if diff := cmp.Diff(s.base, s.chart, quantities); diff != "" {
			t.Errorf("%s (-kustomize +chart):\n%s", s.what, diff)
		}
	}
	for _, pair := range [][2]map[string]string{
		{base.deployment.Spec.Template.Labels, chart.m.deployment.Spec.Template.Labels},
		{base.service.Labels, subset(chart.m.service.Labels, base.service.Labels)},
	} {
		if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
			t.Errorf("labels (-kustomize +chart):\n%s", diff)
		}
	}

	// The NATS StatefulSet: everything of its spec but the config
	// ConfigMap's name and the chart's checksum annotation (nats-server
	// does not watch its files: the chart rolls it on a change).
	cs, bs := chart.nats.sts.DeepCopy(), baseNATS.sts.DeepCopy()
	if cs.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("the chart's NATS pods carry no checksum/config: a changed nats.conf would never reach them")
	}
	delete(cs.Spec.Template.Annotations, "checksum/config")
	if len(cs.Spec.Template.Annotations) == 0 {
		cs.Spec.Template.Annotations = nil
	}
	for _, s := range []*appsv1.StatefulSet{cs, bs} {
		for i := range s.Spec.Template.Spec.Volumes {
			if v := &s.Spec.Template.Spec.Volumes[i]; v.ConfigMap != nil {
				v.ConfigMap.Name = "CONFIG"
			}
		}
	}
	if diff := cmp.Diff(bs.Spec, cs.Spec, quantities); diff != "" {
		t.Errorf("NATS StatefulSet spec (-deploy/nats +chart):\n%s", diff)
	}

	// The config toold reads: the same YAML tree.
	baseCfg, _, err := deployedConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	chartCfg, _, err := deployedConfig(chart.m)
	if err != nil {
		t.Fatal(err)
	}
	var bt, ct map[string]any
	if err := yaml.Unmarshal(baseCfg, &bt); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(chartCfg, &ct); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bt, ct); diff != "" {
		t.Errorf("toold.yaml (-deploy/base +chart):\n%s", diff)
	}

	// The dashboard.
	dash := func(m *manifests) string {
		for _, cm := range m.configMaps {
			if cm.Labels["grafana_dashboard"] == "1" {
				return strings.TrimSpace(cm.Data["toold-dashboard.json"])
			}
		}
		return ""
	}
	if b, c := dash(base), dash(chart.m); b == "" || b != c {
		t.Errorf("the chart's dashboard (%d bytes) is not deploy/base's (%d bytes)", len(c), len(b))
	}
}

// specOf is the spec of an object the chart may leave out, nil if it did.
func specOf[T any](obj *T) any {
	if obj == nil {
		return nil
	}
	switch o := any(obj).(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		return o.Spec
	case *policyv1.PodDisruptionBudget:
		return o.Spec
	case *networkingv1.NetworkPolicy:
		return o.Spec
	case *monitoringv1.ServiceMonitor:
		return o.Spec
	case *monitoringv1.PrometheusRule:
		return o.Spec
	}
	panic(fmt.Sprintf("specOf %T", obj))
}

// subset is the entries of m whose keys keys has.
func subset(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t testing.TB) string {
	t.Helper()
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy", "helm", "toold", "Chart.yaml"), &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

// valueLeaves walks values.yaml along values.schema.json: an object the
// schema lists the properties of (and closes) is descended, every other
// value is one documented value (a free-form map, a list, a Secret
// reference, a scalar). values.yaml and the schema must hold the same keys
// at every level descended. It returns each leaf's path and default.
func valueLeaves(t *testing.T, schema map[string]any, values map[string]any, prefix string, out map[string]any) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	for k := range props {
		if _, ok := values[k]; !ok && k != "global" {
			t.Errorf("values.schema.json has %s%s, values.yaml does not", prefix, k)
		}
	}
	for k, v := range values {
		p := prefix + k
		sub, ok := props[k].(map[string]any)
		if !ok {
			t.Errorf("values.yaml has %s, values.schema.json does not", p)
			continue
		}
		if d, _ := sub["description"].(string); d == "" {
			t.Errorf("values.schema.json: %s has no description", p)
		}
		vm, isMap := v.(map[string]any)
		if _, closed := sub["properties"]; closed && isMap && sub["additionalProperties"] == false {
			valueLeaves(t, sub, vm, p+".", out)
			continue
		}
		out[p] = v
	}
}

// valueAt is the value at a dotted path of values, and whether it is set.
func valueAt(values map[string]any, path string) (any, bool) {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func readYAMLMap(t testing.TB, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// TestChartValuesDocumented: values.yaml, values.schema.json and README's
// table list the same values, and some file of ci/ sets each one to other
// than its default, so `helm lint` and `helm template` of ci/ exercise
// every documented value. A value added to one and not the others fails
// here.
func TestChartValuesDocumented(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(readRepoFile(t, "deploy", "helm", "toold", "values.schema.json"), &schema); err != nil {
		t.Fatal(err)
	}
	defaults := readYAMLMap(t, chartPath("values.yaml"))
	leaves := map[string]any{}
	valueLeaves(t, schema, defaults, "", leaves)

	documented := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(readRepoFile(t, "deploy", "helm", "toold", "README.md")), -1) {
		documented[m[1]] = true
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(leaves)), slices.Sorted(maps.Keys(documented))); diff != "" {
		t.Errorf("values (-values.yaml +README.md's table):\n%s", diff)
	}

	var ci []map[string]any
	for _, f := range chartValueFiles(t) {
		ci = append(ci, readYAMLMap(t, chartPath(f)))
	}
	for _, p := range slices.Sorted(maps.Keys(leaves)) {
		set := slices.ContainsFunc(ci, func(values map[string]any) bool {
			v, ok := valueAt(values, p)
			return ok && !reflect.DeepEqual(v, leaves[p])
		})
		if !set {
			t.Errorf("no file of deploy/helm/toold/ci sets %s to other than its default: helm lint and template never try it", p)
		}
	}
}

// TestChartRefuses: values that cannot work fail `helm template` with a
// message naming the value and what to do, instead of rendering a pod that
// would crash or an open door.
func TestChartRefuses(t *testing.T) {
	helmBin(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a value the chart does not have", []string{"--set", "replicas=3"}, "replicas"},
		{"a misspelt nested value", []string{"--set", "nats.storage.sizee=1Gi"}, "sizee"},
		{"a key without its Secret", []string{"--set", "auth.keys[0].name=agent", "--set", "auth.keys[0].tools[0]=*", "--set", "auth.keys[0].sha256From=null"}, "sha256From"},
		{"a Secret key with no name", []string{"--set", "auditSigningKeyFrom.name="}, "auditSigningKeyFrom"},
		{"listen in config", []string{"--set", "config.listen=0.0.0.0:80"}, "config.listen is set by the chart"},
		{"auth in config", []string{"--set", "config.auth.keys=null"}, "config.auth is set by the chart"},
		{"the NATS URL in config", []string{"--set", "config.state.nats.url=nats://elsewhere:4222"}, "config.state.nats.url is set by the chart"},
		{"a confirm secret in values", []string{"--set", "config.server.confirm_secret=0123456789abcdef0123456789abcdef"}, "confirmSecretFrom"},
		{"an OAuth client secret in values", []string{"--set", "auth.oauth[0].issuer=https://idp.example.com", "--set", "auth.oauth[0].audience=x",
			"--set", "auth.oauth[0].introspection.client_id=toold", "--set", "auth.oauth[0].introspection.client_secret=s3cret"}, "client_secret"},
		{"no way to authenticate", []string{"--set-json", "auth.keys=[]"}, "auth.keys and auth.oauth are both empty"},
		{"two keys, one variable", []string{"-f", filepath.Join("ci", "everything-values.yaml"), "--set", "auth.keys[1].name=AGENT"}, "TOOLD_AGENT_KEY_SHA256"},
		{"external URL beside the bundled NATS", []string{"--set", "externalNats.url=nats://x:4222"}, "set nats.enabled=false"},
		{"no NATS at all", []string{"--set", "nats.enabled=false"}, "externalNats.url is empty"},
		{"external NATS, NetworkPolicy, no egress", []string{"--set", "nats.enabled=false", "--set", "externalNats.url=nats://x:4222"}, "externalNats.egress"},
		{"more stream replicas than servers", []string{"--set", "nats.replicas=1"}, "config.state.nats.replicas is 3"},
		{"a workspace that is no absolute path", []string{"--set", "workspace.mountPath=docs"}, "mountPath"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helmTemplate(t, tt.args...)
			if err == nil {
				t.Fatalf("helm template %v rendered:\n%.2000s", tt.args, out)
			}
			if !bytes.Contains(out, []byte(tt.want)) {
				t.Errorf("helm template %v: the error does not say %q:\n%s", tt.args, tt.want, out)
			}
		})
	}
}
