package config

// The known keys of the config's mappings, for the suggestion of an
// unknown key ("concurency: unknown key; did you mean concurrency?"). A
// key missing here is still read: it is only never suggested.
func topKeys() []string {
	return []string{"source_files", "store", "concurrency", "shutdown_timeout", "cluster", "notify", "admin",
		"log", "history", "defaults", "limits", "sources"}
}

// commonKeys are the keys a source shares with defaults.
func commonKeys() []string {
	return []string{"schedule", "timeout", "backoff", "breaker", "error_after", "conditional", "error_reprobe",
		"tls", "proxy_url", "http2", "follow_redirects", "deliver"}
}

func sourceKeys() []string {
	return append([]string{"name", "type", "limit", "url", "method", "headers", "body", "expect_status", "max_body",
		"basic_auth", "bearer_token_file", "command", "env", "dir"}, commonKeys()...)
}

func adminKeys() []string   { return []string{"listen", "token_file"} }
func logKeys() []string     { return []string{"level", "format"} }
func historyKeys() []string { return []string{"keep"} }
func backoffKeys() []string { return []string{"initial", "max", "multiplier", "jitter"} }
func breakerKeys() []string { return []string{"failures", "cooldown"} }
func limitKeys() []string   { return []string{"concurrency", "rate", "burst"} }

// unknownKey reports key, at kp, as unknown, suggesting the nearest of
// known (the keys of its mapping) when one is near enough to be a typo.
func (l *reporter) unknownKey(kp path, key string, known []string) {
	if s := nearestKey(key, known); s != "" {
		l.addf(kp, "unknown key; did you mean %s?", s)
		return
	}
	l.addf(kp, "unknown key")
}

// nearestKey is the key of known nearest to key by edit distance (the
// first of equals), if it is at most 2 edits away and shorter than key's
// own length (so that "a" does not suggest "dir"); else "".
func nearestKey(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(key, k, bestD); d < bestD && d < len(key) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes: keys are
// ASCII), or limit when it is limit or more (a key far longer than the
// other is not compared further).
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 || len(a)-len(b) >= limit || len(b)-len(a) >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}
