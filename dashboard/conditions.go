package dashboard

import (
	"strconv"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/domain"
)

// conditionSettings are the conditions and select of src (contract
// section 14), as its page lists them.
func conditionSettings(src *config.Source, redact func(string) string) []setting {
	var out []setting
	for i, c := range src.Conditions {
		out = append(out, setting{"condition " + strconv.Itoa(i+1), redact(c)})
	}
	if src.Select != "" {
		out = append(out, setting{"select", redact(src.Select)})
	}
	return out
}

// lastCondition is the condition that failed the newest of recs (newest
// first) that a condition failed, or "".
func lastCondition(recs []domain.PollRecord, redact func(string) string) string {
	for _, r := range recs {
		if r.Condition != "" {
			return redact(r.Condition)
		}
	}
	return ""
}
