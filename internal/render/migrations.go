package render

import (
	"sort"
	"strconv"
	"strings"
)

// sortMigrations orders migration files as wrangler applies them: by the number before
// the first "_" of each name (parsed as JavaScript's parseInt parses it, so "0010" is 10),
// numbered before unnumbered, names in byte order on a tie
// (https://developers.cloudflare.com/d1/reference/migrations/; workers-sdk's
// compareMigrationPaths in packages/wrangler/src/d1/migrations/helpers.ts).
func sortMigrations(files []Migration) {
	sort.SliceStable(files, func(i, j int) bool { return compareMigrationNames(files[i].Name, files[j].Name) < 0 })
}

func compareMigrationNames(a, b string) int {
	na, oka := leadingNumber(a)
	nb, okb := leadingNumber(b)
	switch {
	case oka && okb && na != nb:
		if na < nb {
			return -1
		}
		return 1
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// leadingNumber is parseInt(name.split("_")[0], 10): the digits that start the name's
// first "_"-separated part, if any.
func leadingNumber(name string) (uint64, bool) {
	part, _, _ := strings.Cut(name, "_")
	end := 0
	for end < len(part) && part[end] >= '0' && part[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(part[:end], 10, 64)
	return n, err == nil
}
