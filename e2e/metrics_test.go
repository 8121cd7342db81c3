package e2e

// The Prometheus text format of /metrics, parsed by expfmt.

import (
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is GET /metrics, parsed.
func (d *daemon) metrics() metricSet {
	d.t.Helper()
	code, body := d.do(http.MethodGet, "/metrics", "", "")
	if code != http.StatusOK {
		d.t.Fatalf("GET /metrics: status %d: %s", code, body)
	}
	m, err := parseMetrics(string(body))
	if err != nil {
		d.t.Fatalf("GET /metrics: %v", err)
	}
	return m
}

// metric returns the value of the gauge or counter name with exactly the
// labels given as name, value pairs (none for an unlabelled metric).
func (d *daemon) metric(name string, labels ...string) float64 {
	d.t.Helper()
	v, ok := d.metrics().value(name, labels...)
	if !ok {
		d.t.Fatalf("metric %s%v not found", name, labels)
	}
	return v
}

// metricSet is a Prometheus text exposition parsed by expfmt, by family
// name.
type metricSet map[string]*dto.MetricFamily

// parseMetrics parses a Prometheus text exposition.
func parseMetrics(text string) (metricSet, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse the metrics: %w", err)
	}
	return metricSet(fams), nil
}

// typeOf is the family's type in lower case ("gauge", "histogram"), or ""
// when the exposition has no such family.
func (m metricSet) typeOf(name string) string {
	f := m[name]
	if f == nil {
		return ""
	}
	return strings.ToLower(f.GetType().String())
}

// series returns the sample of family name whose label set is exactly
// labels (name, value pairs).
func (m metricSet) series(name string, labels ...string) (*dto.Metric, bool) {
	f := m[name]
	if f == nil || len(labels)%2 != 0 {
		return nil, false
	}
	want := map[string]string{}
	for i := 0; i < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, s := range f.GetMetric() {
		if len(s.GetLabel()) != len(want) {
			continue
		}
		match := true
		for _, lp := range s.GetLabel() {
			if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
				match = false
			}
		}
		if match {
			return s, true
		}
	}
	return nil, false
}

// value is the value of a gauge, counter or untyped sample.
func (m metricSet) value(name string, labels ...string) (float64, bool) {
	s, ok := m.series(name, labels...)
	switch {
	case !ok:
		return 0, false
	case s.Gauge != nil:
		return s.GetGauge().GetValue(), true
	case s.Counter != nil:
		return s.GetCounter().GetValue(), true
	case s.Untyped != nil:
		return s.GetUntyped().GetValue(), true
	}
	return 0, false
}

// histogram returns the count and sum of an unlabelled histogram.
func (m metricSet) histogram(name string) (count uint64, sum float64, ok bool) {
	s, ok := m.series(name)
	if !ok || s.Histogram == nil {
		return 0, 0, false
	}
	return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum(), true
}

// total is the sum of a gauge or counter over all its label sets.
func (m metricSet) total(name string) float64 {
	sum := 0.0
	for _, s := range m[name].GetMetric() {
		sum += s.GetGauge().GetValue() + s.GetCounter().GetValue()
	}
	return sum
}
