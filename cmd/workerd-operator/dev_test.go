package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// make dev says plainly that its cluster isolates no tenant (issue 34 allows that instead
// of a network namespace per pod), and the section it points to exists.
func TestDevSaysItHasNoTenantIsolation(t *testing.T) {
	if !strings.Contains(devIsolationNotice, "no tenant isolation") {
		t.Errorf("notice %q does not say there is no tenant isolation", devIsolationNotice)
	}
	m := regexp.MustCompile(`docs/([a-z-]+\.md)#([a-z-]+)`).FindStringSubmatch(devIsolationNotice)
	if m == nil {
		t.Fatalf("notice %q names no docs section", devIsolationNotice)
	}
	doc, err := os.ReadFile("../../docs/" + m[1])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok && anchor(h) == m[2] {
			found = true
		}
	}
	if !found {
		t.Errorf("docs/%s has no heading #%s", m[1], m[2])
	}
	if !strings.Contains(string(doc), "no tenant isolation") {
		t.Errorf("docs/%s does not say there is no tenant isolation", m[1])
	}
}

// anchor is a heading's GitHub anchor: lower case, punctuation dropped, spaces as dashes.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
