package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoadConditions is the validation of 100,000 sources each with
// two conditions (contract 14, target <= 3 s): the expressions are the
// same text in every source, as a fleet's are, and compiled once.
//
//	go test ./config -run '^$' -bench BenchmarkLoadConditions -benchtime=1x -count 3
func BenchmarkLoadConditions(b *testing.B) {
	for _, c := range []struct{ name, conds string }{{"none", ""}, {"two-conditions", "    conditions: [status == 200, 'body.json.status == \"ok\"']\n"}} {
		b.Run(c.name, func(b *testing.B) {
			var sb strings.Builder
			sb.WriteString("sources:\n")
			for i := range 100_000 {
				fmt.Fprintf(&sb, "  - name: s%d\n    type: http\n    url: https://api%d.example/health\n%s", i, i%100, c.conds)
			}
			path := filepath.Join(b.TempDir(), "pacer.yaml")
			if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			c0 := cpuOf(b)
			b.ResetTimer()
			for range b.N {
				cfg, err := Load(path, nil)
				if err != nil || len(cfg.Sources) != 100_000 || (cfg.Sources[99_999].Checks == nil) != (c.conds == "") {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((cpuOf(b)-c0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuOf is this process's CPU time (user + system).
func cpuOf(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
