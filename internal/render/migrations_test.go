package render

import (
	"slices"
	"testing"
)

// The order of migration files beyond TestDataBindingsConformance's: wrangler's
// compareMigrationPaths (packages/wrangler/src/d1/migrations/helpers.ts of
// cloudflare/workers-sdk; https://developers.cloudflare.com/d1/reference/migrations/).
func TestSortMigrations(t *testing.T) {
	cases := []struct{ in, want []string }{
		{[]string{"10_c.sql", "1_a.sql", "9_b.sql"}, []string{"1_a.sql", "9_b.sql", "10_c.sql"}},
		{[]string{"0002_b.sql", "0001_a.sql", "10_x.sql"}, []string{"0001_a.sql", "0002_b.sql", "10_x.sql"}},
		{[]string{"init.sql", "2_b.sql", "001_a.sql"}, []string{"001_a.sql", "2_b.sql", "init.sql"}}, // numbered first
		{[]string{"1_b.sql", "01_a.sql"}, []string{"01_a.sql", "1_b.sql"}},                           // same number: byte order
		{[]string{"b.sql", "a.sql"}, []string{"a.sql", "b.sql"}},
	}
	for _, tc := range cases {
		files := make([]Migration, len(tc.in))
		for i, n := range tc.in {
			files[i] = Migration{Name: n}
		}
		sortMigrations(files)
		got := make([]string, len(files))
		for i, f := range files {
			got[i] = f.Name
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("sortMigrations(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
