package wrangler

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// containerBuild is a containers[] entry whose image is a Dockerfile: the image has to
// be built and pushed before the DurableObjectNamespace can name it.
type containerBuild struct {
	path, class, dockerfile string
	don                     *v1alpha1.DurableObjectNamespace
}

// containerKeys are the keys of a containers[] entry that mean nothing here: they
// steer Cloudflare's rollouts, its image registry and its placement.
var containerKeys = map[string]string{
	"name":                        "the application's name in Cloudflare's dashboard",
	"image_build_context":         "used with image_vars when the image is built (see --container-image)",
	"image_vars":                  "build arguments, used when the image is built (see --container-image)",
	"rollout_step_percentage":     "Cloudflare's gradual rollout; a changed image replaces instances as they restart",
	"rollout_kind":                "Cloudflare's gradual rollout; a changed image replaces instances as they restart",
	"rollout_active_grace_period": "Cloudflare's gradual rollout; a changed image replaces instances as they restart",
	"constraints":                 "Cloudflare's placement of instances; Kubernetes schedules the pods",
	"affinities":                  "Cloudflare's placement of instances; Kubernetes schedules the pods",
	"scheduling_policy":           "Cloudflare's placement of instances; Kubernetes schedules the pods",
	"wrangler_ssh":                "wrangler containers ssh is Cloudflare's",
	"authorized_keys":             "wrangler containers ssh is Cloudflare's",
	"trusted_user_ca_keys":        "wrangler containers ssh is Cloudflare's",
	"observability":               "Cloudflare's dashboard; an instance's output is its pod's log",
	"durable_objects":             "the class comes from class_name",
	"instances":                   "deprecated by max_instances",
	"configuration":               "deprecated; use image and instance_type",
	"migrate":                     "Cloudflare's migration of older container applications",
}

// containers puts each containers[] entry on the DurableObjectNamespace of its class
// (spec.container, docs/containers.md). It runs after durable_objects made them.
func (c *converter) containers() {
	path, ok := c.eff.Paths["containers"]
	if !ok {
		return
	}
	for i, e := range list(c.eff.Values["containers"]) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		class, image := str(m, "class_name"), str(m, "image")
		if !ok || class == "" || image == "" {
			c.unsupported(p, "needs class_name and image")
			continue
		}
		don := c.classNamespace(class)
		if don == nil {
			c.unsupported(p+".class_name", fmt.Sprintf("no durable_objects binding of this Worker names class %s, whose objects run the containers", class))
			continue
		}
		spec := &v1alpha1.ContainerSpec{Image: image}
		c.containerFields(p, m, spec)
		don.Spec.Container = spec
		if df := c.dockerfile(image); df != "" {
			c.res.containerBuilds = append(c.res.containerBuilds, containerBuild{path: p + ".image", class: class, dockerfile: df, don: don})
		}
	}
}

func (c *converter) classNamespace(class string) *v1alpha1.DurableObjectNamespace {
	for _, d := range c.res.DurableObjectNamespaces {
		if d.Spec.ClassName == class {
			return d
		}
	}
	return nil
}

// containerFields maps max_instances and instance_type and reports the other keys.
func (c *converter) containerFields(p string, m map[string]any, spec *v1alpha1.ContainerSpec) {
	for _, k := range sortedKeys(m) {
		switch k {
		case "class_name", "image":
		case "max_instances":
			n, ok := integer(m[k])
			if !ok || n < 1 || n > 1000 {
				c.unsupported(p+"."+k, "not a whole number from 1 to 1000 (spec.container.maxInstances)")
				continue
			}
			v := int32(n)
			spec.MaxInstances = &v
		case "instance_type":
			s, ok := m[k].(string)
			if ok && s == "dev" {
				s = "lite" // wrangler's former name of lite
			}
			if !ok || !v1alpha1.IsContainerInstanceType(s) {
				c.unsupported(p+"."+k, "custom instance types are not supported; use lite, basic or standard-1 to standard-4 (https://developers.cloudflare.com/containers/platform/limits/)")
				continue
			}
			spec.InstanceType = s
		default:
			if why := containerKeys[k]; why != "" {
				c.res.Ignored = append(c.res.Ignored, Issue{p + "." + k, why})
			} else {
				c.unsupported(p+"."+k, unknownReason)
			}
		}
	}
}

// dockerfile is the Dockerfile image names, relative to the project, or "" when image
// is a registry reference (wrangler: a path that exists is built, anything else pulled).
func (c *converter) dockerfile(image string) string {
	p := image
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.dir, p)
	}
	if st, err := os.Stat(p); err == nil {
		if st.IsDir() {
			p = filepath.Join(p, "Dockerfile")
		}
		if rel, err := filepath.Rel(c.root, p); err == nil {
			return rel
		}
		return p
	}
	return ""
}

// SetContainerImages names the built image of each class whose containers[].image is a
// Dockerfile (images: class name → reference). A Dockerfile left without an image is an
// error saying how to build one: the cluster runs images, it builds none.
func (res *Result) SetContainerImages(file string, images map[string]string) error {
	var missing []string
	for _, b := range res.containerBuilds {
		if ref := images[b.class]; ref != "" {
			b.don.Spec.Container.Image = ref
			continue
		}
		missing = append(missing, fmt.Sprintf("%s: %s is a Dockerfile; build and push it (docker build -t REF -f %s . && docker push REF), then pass --container-image %s=REF (docs/containers.md)",
			b.path, b.dockerfile, b.dockerfile, b.class))
	}
	for class := range images {
		if res.containerClass(class) == nil {
			missing = append(missing, fmt.Sprintf("--container-image %s: no containers[] entry has class_name %s", class, class))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("%s:\n  %s", file, strings.Join(missing, "\n  "))
}

func (res *Result) containerClass(class string) *v1alpha1.DurableObjectNamespace {
	for _, d := range res.DurableObjectNamespaces {
		if d.Spec.ClassName == class && d.Spec.Container != nil {
			return d
		}
	}
	return nil
}

// DeclaresContainers reports whether the configuration wrangler would deploy from dir
// has containers, at its top level or in an environment (false on any read error: a
// configuration a build writes later is not known yet).
func DeclaresContainers(dir string) bool {
	cfg, err := Load(dir)
	if err != nil {
		return false
	}
	if len(list(cfg.Raw["containers"])) > 0 {
		return true
	}
	envs, _ := cfg.Raw["env"].(map[string]any)
	for _, e := range envs {
		if m, ok := e.(map[string]any); ok && len(list(m["containers"])) > 0 {
			return true
		}
	}
	return false
}
