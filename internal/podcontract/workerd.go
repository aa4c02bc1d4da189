package podcontract

import (
	"regexp"
	"strings"
)

// workerdReleaseRE is a workerd release as npm publishes it: 1.YYYYMMDD.N.
var workerdReleaseRE = regexp.MustCompile(`^1\.[0-9]{8}\.[0-9]+$`)

// ImageWorkerdVersion is the workerd release an image's tag names (with or without a
// digest after it); "" when the tag is none.
func ImageWorkerdVersion(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || i < strings.LastIndex(image, "/") {
		return ""
	}
	if tag := image[i+1:]; workerdReleaseRE.MatchString(tag) {
		return tag
	}
	return ""
}
