package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// pendingMetrics are named by the dashboard before toold exports them: the
// sanitizer's counters, being written concurrently. While a name is not
// exported it is tolerated (and logged); once exported it is checked like
// every other. Delete an entry when its metric ships, so a later rename
// fails this test.
var pendingMetrics = map[string]string{
	"toold_redactions_total":       "sanitizer: redactions by tool, direction and kind",
	"toold_sanitize_blocked_total": "sanitizer: calls refused by the sanitizer, by tool and kind",
}

// targetLabels are attached by Prometheus (the target and its Kubernetes
// metadata), not by toold.
var targetLabels = map[string]bool{"namespace": true, "pod": true, "job": true, "instance": true,
	"service": true, "endpoint": true, "container": true}

// exported is what a live toold exports: family -> label -> values.
type exported struct {
	fams   map[string]*dto.MetricFamily
	labels map[string]map[string]map[string]bool
}

func scrape(t *testing.T) *exported {
	t.Helper()
	lt := startToold(t, renderBase(t), renderNATS(t))
	lt.exercise(t)
	ex := &exported{fams: lt.families(t), labels: map[string]map[string]map[string]bool{}}
	for name, f := range ex.fams {
		ls := map[string]map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if ls[lp.GetName()] == nil {
					ls[lp.GetName()] = map[string]bool{}
				}
				ls[lp.GetName()][lp.GetValue()] = true
			}
		}
		ex.labels[name] = ls
	}
	return ex
}

// family resolves a series name to its family: histogram and summary
// series (_bucket, _sum, _count) belong to the family without the suffix.
func (ex *exported) family(name string) (fam string, bucket, ok bool) {
	if _, ok := ex.fams[name]; ok {
		return name, false, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suf)
		if !found {
			continue
		}
		f, ok := ex.fams[base]
		switch {
		case !ok:
		case f.GetType() == dto.MetricType_HISTOGRAM:
			return base, suf == "_bucket", true
		case f.GetType() == dto.MetricType_SUMMARY && suf != "_bucket":
			return base, false, true
		}
	}
	return "", false, false
}

func (ex *exported) hasLabel(fam string, bucket bool, label string) bool {
	return targetLabels[label] || (bucket && label == "le") || ex.labels[fam][label] != nil
}

var promqlParser = parser.NewParser(parser.Options{})

// checkExpr parses expr and checks, against what toold exports, every
// metric it selects, every label it matches or groups by, and the literal
// values it matches. It returns the expression's output labels and whether they are known.
func (ex *exported) checkExpr(t *testing.T, where, expr string) (map[string]bool, bool) {
	t.Helper()
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: not valid PromQL: %v\n%s", where, err, expr)
		return nil, false
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			ex.checkSelector(t, where, n)
		case *parser.AggregateExpr:
			if !n.Without {
				ex.checkGrouping(t, where, "by", n.Grouping, n.Expr)
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && vm.On {
				ex.checkGrouping(t, where, "on", vm.MatchingLabels, n.LHS)
				ex.checkGrouping(t, where, "on", vm.MatchingLabels, n.RHS)
			}
		}
		return nil
	})
	out, open := outLabels(e)
	return out, !open
}

func (ex *exported) checkSelector(t *testing.T, where string, vs *parser.VectorSelector) {
	t.Helper()
	if vs.Name == "" {
		t.Errorf("%s: a selector without a metric name (%s)", where, vs)
		return
	}
	fam, bucket, ok := ex.family(vs.Name)
	if !ok {
		if why, pending := pendingMetrics[vs.Name]; pending {
			t.Logf("%s: %s is not exported yet (%s); tolerated while it is pending", where, vs.Name, why)
		} else {
			t.Errorf("%s: toold exports no metric %s", where, vs.Name)
		}
		return
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		if !ex.hasLabel(fam, bucket, m.Name) {
			t.Errorf("%s: %s has no label %q (it has %v)", where, vs.Name, m.Name, slices.Sorted(maps.Keys(ex.labels[fam])))
			continue
		}
		if targetLabels[m.Name] || strings.Contains(m.Value, "__var_") || m.Name == "le" {
			continue
		}
		// Literal values must be ones toold exports: bound="target",
		// kind="queue", reason=~"queue_full|...".
		var want []string
		switch m.Type.String() {
		case "=":
			want = []string{m.Value}
		case "=~":
			if regexp.MustCompile(`^[\w|]+$`).MatchString(m.Value) {
				want = strings.Split(m.Value, "|")
			}
		}
		for _, v := range want {
			if !ex.labels[fam][m.Name][v] {
				t.Errorf("%s: %s{%s} matches %q, a value toold does not export (it has %v)",
					where, vs.Name, m.Name, v, slices.Sorted(maps.Keys(ex.labels[fam][m.Name])))
			}
		}
	}
}

// checkGrouping checks that labels grouped or matched on exist on some
// metric below the node.
func (ex *exported) checkGrouping(t *testing.T, where, clause string, names []string, below parser.Node) {
	t.Helper()
	for _, l := range names {
		found, known := false, false
		parser.Inspect(below, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				if fam, bucket, ok := ex.family(vs.Name); ok {
					known = true
					found = found || ex.hasLabel(fam, bucket, l)
				}
			}
			return nil
		})
		if known && !found {
			t.Errorf("%s: %s (%s): no metric it applies to has the label %q", where, clause, l, l)
		}
	}
}

// outLabels tells which labels an expression's result carries; open is
// true when they are not known (a bare selector carries all its series').
func outLabels(e parser.Expr) (labels map[string]bool, open bool) {
	set := func(ls []string) map[string]bool {
		m := map[string]bool{}
		for _, l := range ls {
			m[l] = true
		}
		return m
	}
	switch e := e.(type) {
	case *parser.AggregateExpr:
		if e.Without {
			return nil, true
		}
		return set(e.Grouping), false
	case *parser.ParenExpr:
		return outLabels(e.Expr)
	case *parser.StepInvariantExpr:
		return outLabels(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return map[string]bool{}, false
	case *parser.Call:
		switch e.Func.Name {
		case "absent", "absent_over_time", "vector", "scalar", "time":
			return map[string]bool{}, false // (absent keeps equality matchers' labels; none are used)
		case "histogram_quantile":
			ls, open := outLabels(e.Args[1])
			delete(ls, "le")
			return ls, open
		}
		for _, a := range e.Args {
			if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
				return outLabels(a)
			}
		}
		return nil, true
	case *parser.BinaryExpr:
		vm := e.VectorMatching
		if vm != nil && vm.Card == parser.CardOneToOne && vm.On && !e.Op.IsComparisonOperator() && !e.Op.IsSetOperator() {
			return set(vm.MatchingLabels), false
		}
		if _, ok := e.LHS.(*parser.NumberLiteral); ok {
			return outLabels(e.RHS)
		}
		ls, open := outLabels(e.LHS)
		if vm != nil && ls != nil {
			for _, l := range vm.Include {
				ls[l] = true
			}
		}
		return ls, open
	}
	return nil, true
}

// requiredAlerts are the alerts issue 3 asks for, by what their
// expressions must contain.
var requiredAlerts = []struct {
	alert     string
	metrics   []string
	matcher   string  // a label matcher the expression must hold, "" for none
	quantile  float64 // a histogram_quantile it must take, 0 for none
	minFor    time.Duration
	functions []string
}{
	{"TooldToolLatencyAboveTarget", []string{"toold_tool_execution_duration_seconds_bucket", "toold_tool_latency_target_seconds"}, `bound="target"`, 0.95, 10 * time.Minute, nil},
	{"TooldToolLatencyAboveMax", []string{"toold_tool_execution_duration_seconds_bucket", "toold_tool_latency_target_seconds"}, `bound="max"`, 0.99, 0, nil},
	{"TooldToolRejectionRatioHigh", []string{"toold_tool_rejections_total", "toold_tool_calls_total"}, "", 0, 0, nil},
	{"TooldToolStuck", []string{"toold_tool_stuck"}, "", 0, 0, nil},
	{"TooldNotReady", []string{"toold_ready"}, "", 0, time.Minute, nil},
	{"TooldAbsent", []string{"toold_build_info"}, "", 0, 0, []string{"absent_over_time"}},
}

// exprFacts are what requiredAlerts look for in an expression.
type exprFacts struct {
	metrics, matchers, functions map[string]bool
	quantiles                    map[float64]bool
}

func facts(e parser.Expr) exprFacts {
	f := exprFacts{map[string]bool{}, map[string]bool{}, map[string]bool{}, map[float64]bool{}}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			f.metrics[n.Name] = true
			for _, m := range n.LabelMatchers {
				f.matchers[m.String()] = true
			}
		case *parser.Call:
			f.functions[n.Func.Name] = true
			if lit, ok := n.Args[0].(*parser.NumberLiteral); ok && n.Func.Name == "histogram_quantile" {
				f.quantiles[lit.Val] = true
			}
		}
		return nil
	})
	return f
}

var labelRef = regexp.MustCompile(`\$labels\.(\w+)`)

// alertTemplate parses an annotation as Prometheus does (text/template
// with its preamble and functions, stubbed) and runs it on sample data.
func alertTemplate(text string) error {
	stub := func(v any) string { return fmt.Sprint(v) }
	funcs := template.FuncMap{"humanize": stub, "humanize1024": stub, "humanizeDuration": stub,
		"humanizePercentage": stub, "humanizeTimestamp": stub, "toUpper": strings.ToUpper, "toLower": strings.ToLower,
		"title": stub, "stripPort": stub, "stripDomain": stub}
	pre := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	tmpl, err := template.New("annotation").Funcs(funcs).Parse(pre + text)
	if err != nil {
		return err
	}
	data := map[string]any{"Labels": map[string]string{}, "ExternalLabels": map[string]string{}, "ExternalURL": "", "Value": 1.5}
	return tmpl.Execute(io.Discard, data)
}

func TestAlertRules(t *testing.T) {
	m := renderBase(t)
	ex := scrape(t)
	byName := map[string]exprFacts{}
	fors := map[string]time.Duration{}
	for _, g := range m.rule.Spec.Groups {
		for _, r := range g.Rules {
			where := g.Name + "/" + r.Alert + r.Record
			if r.Alert == "" {
				t.Errorf("%s: a recording rule; this base has alerts only (teach the test)", where)
				continue
			}
			out, known := ex.checkExpr(t, where, r.Expr.String())
			e, err := promqlParser.ParseExpr(r.Expr.String())
			if err != nil {
				continue // reported by checkExpr
			}
			byName[r.Alert] = facts(e)
			if r.For != nil {
				d, err := model.ParseDuration(string(*r.For))
				if err != nil {
					t.Errorf("%s: for %q: %v", where, *r.For, err)
				}
				fors[r.Alert] = time.Duration(d)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", where, s)
			}
			for _, a := range []string{"summary", "description"} {
				text, ok := r.Annotations[a]
				if !ok {
					t.Errorf("%s: no %s annotation", where, a)
				}
				if err := alertTemplate(text); err != nil {
					t.Errorf("%s: annotation %s: %v", where, a, err)
				}
				for _, ref := range labelRef.FindAllStringSubmatch(text, -1) {
					if known && !out[ref[1]] {
						t.Errorf("%s: annotation %s uses $labels.%s; the expression's result has only %v",
							where, a, ref[1], slices.Sorted(maps.Keys(out)))
					}
				}
			}
		}
	}
	for _, req := range requiredAlerts {
		f, ok := byName[req.alert]
		if !ok {
			t.Errorf("no alert %s", req.alert)
			continue
		}
		for _, mt := range req.metrics {
			if !f.metrics[mt] {
				t.Errorf("%s does not use %s", req.alert, mt)
			}
		}
		if req.matcher != "" && !f.matchers[req.matcher] {
			t.Errorf("%s does not select %s", req.alert, req.matcher)
		}
		if req.quantile != 0 && !f.quantiles[req.quantile] {
			t.Errorf("%s takes no %v quantile", req.alert, req.quantile)
		}
		for _, fn := range req.functions {
			if !f.functions[fn] {
				t.Errorf("%s does not use %s()", req.alert, fn)
			}
		}
		if fors[req.alert] < req.minFor {
			t.Errorf("%s: for %v, want at least %v", req.alert, fors[req.alert], req.minFor)
		}
	}
}

// dashboard is the part of Grafana's dashboard JSON the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Repeat     string `json:"repeat"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		RefID        string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

var (
	grafanaVar = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::\w+)?\}`)
	legendRef  = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	labelVals  = regexp.MustCompile(`^label_values\((?:(.+),\s*)?(\w+)\)$`)
)

// substitute replaces Grafana's variables so the expression parses:
// interval variables by a duration, the dashboard's own by a marker the
// label checks recognise.
func substitute(expr string, vars map[string]bool) (string, []string) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(s string) string {
		m := grafanaVar.FindStringSubmatch(s)
		name := m[1] + m[2]
		switch {
		case name == "__rate_interval" || name == "__interval" || name == "__range":
			return "5m"
		case vars[name]:
			return "__var_" + name + "__"
		}
		unknown = append(unknown, name)
		return s
	})
	return out, unknown
}

func TestGrafanaDashboard(t *testing.T) {
	m := renderBase(t)
	var cmName string
	var raw string
	for name, cm := range m.configMaps {
		if cm.Labels["grafana_dashboard"] == "1" {
			if len(cm.Data) != 1 {
				t.Fatalf("ConfigMap %s: %d keys, want one dashboard", name, len(cm.Data))
			}
			for k, v := range cm.Data {
				cmName, raw = name+"/"+k, v
			}
		}
	}
	if cmName == "" {
		t.Fatal(`no ConfigMap labelled grafana_dashboard: "1"`)
	}
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("%s: %v", cmName, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid (stable links) and a title")
	}
	ex := scrape(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // older dashboards: a plain string
		}
		lv := labelVals.FindStringSubmatch(q.Query)
		if lv == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		sel, _ := substitute(lv[1], vars)
		where := "variable " + v.Name
		ex.checkExpr(t, where, sel)
		if e, err := promqlParser.ParseExpr(sel); err == nil {
			if vs, ok := e.(*parser.VectorSelector); ok {
				if fam, bucket, ok := ex.family(vs.Name); ok && !ex.hasLabel(fam, bucket, lv[2]) {
					t.Errorf("%s: %s has no label %s", where, vs.Name, lv[2])
				}
			}
		}
	}

	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id", where)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v outside Grafana's 24 columns", where, p.GridPos)
		}
		if p.Repeat != "" && !vars[p.Repeat] {
			t.Errorf("%s: repeats over $%s, which is no variable", where, p.Repeat)
		}
		if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
			t.Errorf("%s: datasource must be the ${datasource} variable", where)
		}
		for _, tg := range p.Targets {
			expr, unknown := substitute(tg.Expr, vars)
			if len(unknown) > 0 {
				t.Errorf("%s %s: undefined variables %v", where, tg.RefID, unknown)
			}
			out, known := ex.checkExpr(t, where+" "+tg.RefID, expr)
			for _, ref := range legendRef.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if known && !out[ref[1]] {
					t.Errorf("%s %s: legend {{%s}}; the expression's result has only %v", where, tg.RefID, ref[1], slices.Sorted(maps.Keys(out)))
				}
			}
			if e, err := promqlParser.ParseExpr(expr); err == nil {
				maps.Copy(used, facts(e).metrics)
			}
		}
	}
	// What issue 3 asks the dashboard to show.
	for _, want := range []string{
		"toold_tool_execution_duration_seconds_bucket", "toold_tool_latency_target_seconds", // latency vs target
		"toold_tool_in_flight", "toold_tool_capacity", "toold_tool_queue_depth", // capacity
		"toold_tool_rejections_total", "toold_tool_calls_total", "toold_http_requests_total",
	} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	var unused []string
	for name := range ex.fams {
		if strings.HasPrefix(name, "toold_") && !used[name] && !used[name+"_bucket"] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		t.Logf("toold metrics no panel shows: %v", slices.Sorted(slices.Values(unused)))
	}
}
