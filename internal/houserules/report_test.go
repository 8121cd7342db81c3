package houserules

import (
	"testing"
)

func TestReport(t *testing.T) {
	v, err := Check("../..", House())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Log(x)
	}
	t.Logf("%d violations", len(v))
}
