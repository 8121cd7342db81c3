package backend

import "testing"

func TestIsPostgres(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"postgres://u:p@h/db", true},
		{"postgresql://h/db?sslmode=disable", true},
		{"POSTGRES://h/db", true},
		{"PostgreSQL://h/db", true},
		{"postgres://", true},
		{"pacer.db", false},
		{"/var/lib/pacer/pacer.db", false},
		{"", false},
		{"postgres:/h/db", false},
		{"postgres", false},
		{"postgres.db", false},
		{"./postgres://x", false},
		{" postgres://h/db", false},
		{"mysql://h/db", false},
		{"sqlite://pacer.db", false},
		{"postgresq://h", false},
	}
	for _, tc := range tests {
		if got := IsPostgres(tc.s); got != tc.want {
			t.Errorf("IsPostgres(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
