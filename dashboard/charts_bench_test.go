package dashboard

import (
	"testing"
	"time"

	"github.com/pacer-dev/pacer/scheduler/rates"
)

// BenchmarkLoadCharts draws the overview's two load charts over a full
// hour of samples: what every overview pays for them.
func BenchmarkLoadCharts(b *testing.B) {
	now := time.Now()
	samples := make([]rates.Sample, rates.Size)
	for i := range samples {
		samples[i].At, samples[i].Inflight, samples[i].Limit = now.Add(time.Duration(i-rates.Size)*rates.Every), i%17, 16
		samples[i].PerSecond[rates.Success], samples[i].PerSecond[rates.Failure] = float64(i%50), float64(i%7)
	}
	var size int
	for b.Loop() {
		r, in := loadCharts(samples, now)
		size = len(r) + len(in)
	}
	b.ReportMetric(float64(size), "bytes")
}
