package wrangler

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
)

// maxName keeps derived names short enough for the StatefulSets the operator names
// after them ("<name>-do", "<name>-wf") and their pods' revision labels.
const maxName = 52

// dnsName turns s into a DNS-1123 label: lowercase letters, digits and "-"; longer
// names are cut and given a hash suffix so that distinct inputs stay distinct.
func dnsName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		out = "worker"
	}
	if len(out) > maxName {
		sum := sha256.Sum256([]byte(s))
		out = strings.TrimRight(out[:maxName-9], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return out
}

// kebab turns a class name into words joined by "-": "MyDurableObject" →
// "my-durable-object", "HTTPServer" → "http-server".
func kebab(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				b.WriteByte('-')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func secretKeyRef(secret, key string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
}
