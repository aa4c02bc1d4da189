package webhook

import (
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// validateAssets checks spec.assets: the binding name against spec.bindings, and the
// _headers and _redirects texts against Cloudflare's per-file limits.
func validateAssets(c *check, path *field.Path, a *v1alpha1.WorkerAssets, bindings []v1alpha1.Binding) {
	if a == nil {
		return
	}
	if a.Binding != "" {
		for i, b := range bindings {
			if b.Name == a.Binding {
				c.add(field.Duplicate(path.Child("binding"), a.Binding+" (also spec.bindings["+strconv.Itoa(i)+"].name)"))
			}
		}
	}
	validateRunWorkerFirst(c, path.Child("runWorkerFirst"), a.RunWorkerFirst)
	validateAssetHeaders(c, path.Child("headers"), a.Headers)
	validateAssetRedirects(c, path.Child("redirects"), a.Redirects)
}

// validateRunWorkerFirst counts the patterns (the schema's maxItems is the same
// limit) and refuses a list of only "!" patterns, which excludes paths from nothing:
// Wrangler refuses it too ("must provide at least 1 non-negative rule").
func validateRunWorkerFirst(c *check, path *field.Path, patterns []string) {
	c.add(c.tooMany(path, int64(len(patterns)), limits.AssetRunWorkerFirstRule, "the number of patterns"))
	if len(patterns) == 0 {
		return
	}
	for _, p := range patterns {
		if !strings.HasPrefix(p, "!") {
			return
		}
	}
	c.add(field.Invalid(path, patterns, "needs at least one pattern without \"!\": a \"!\" pattern only excludes paths from the others (docs/assets.md)"))
}

// validateAssetHeaders counts the rules of a _headers text (a rule starts at a line
// that is not indented, empty or a comment: its URL pattern) and measures every line
// (https://developers.cloudflare.com/workers/static-assets/headers/).
func validateAssetHeaders(c *check, path *field.Path, text string) {
	rules := int64(0)
	for i, line := range lines(text) {
		c.add(c.tooMany(path, int64(len(line)), limits.AssetHeaderLineChars, "line "+strconv.Itoa(i+1)+"'s length"))
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		rules++
	}
	c.add(c.tooMany(path, rules, limits.AssetHeaderRules, "the number of rules"))
}

// placeholder is a _redirects placeholder, ":name"; with a splat it makes a rule
// dynamic (https://developers.cloudflare.com/workers/static-assets/redirects/).
var placeholder = regexp.MustCompile(`:[A-Za-z]\w*`)

// validateAssetRedirects counts the static and dynamic rules of a _redirects text (a
// rule is a line that is not empty or a comment; dynamic when its source has a splat
// or a placeholder) and measures every rule.
func validateAssetRedirects(c *check, path *field.Path, text string) {
	var static, dynamic int64
	for i, line := range lines(text) {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c.add(c.tooMany(path, int64(len(t)), limits.AssetRedirectChars, "rule "+strconv.Itoa(i+1)+"'s length"))
		source := strings.Fields(t)[0]
		if strings.Contains(source, "*") || placeholder.MatchString(source) {
			dynamic++
		} else {
			static++
		}
	}
	c.add(c.tooMany(path, static, limits.AssetStaticRedirects, "the number of static rules"))
	c.add(c.tooMany(path, dynamic, limits.AssetDynamicRedirects, "the number of dynamic rules (a splat or a placeholder in the source)"))
}

// lines splits text at "\n", dropping a "\r" before it and the empty tail.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	ls := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}
