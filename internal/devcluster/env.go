package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerEnv builds a container's environment as a kubelet does: the service
// variables of the API server, envFrom, then env (value with $(VAR) expansion, or
// valueFrom: secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef). Errors name
// the variable and the missing object or key.
func (r *podRun) containerEnv(ctx context.Context, c *corev1.Container) ([]string, error) {
	api := r.p.c.apiURL
	host, port := "127.0.0.1", api[strings.LastIndex(api, ":")+1:]
	vals := map[string]string{
		"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
		"KUBERNETES_SERVICE_PORT_HTTPS": port,
		"HOSTNAME":                      r.pod.Name,
	}
	order := []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS", "HOSTNAME"}
	if path, ok := r.volumes[kubeconfigVolume]; ok && r.hasTokenVolume() {
		vals["KUBECONFIG"] = path
		order = append(order, "KUBECONFIG")
	}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	cli := r.p.c.client.CoreV1()
	ns := r.pod.Namespace
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := cli.ConfigMaps(ns).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom configMapRef %q: %w", ef.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s, err := cli.Secrets(ns).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom secretRef %q: %w", ef.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, func(k string) (string, bool) { v, ok := vals[k]; return v, ok }))
			continue
		}
		v, skip, err := r.valueFrom(ctx, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order)+2)
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	if p := os.Getenv("PATH"); p != "" {
		if _, ok := vals["PATH"]; !ok {
			out = append(out, "PATH="+p)
		}
	}
	return out, nil
}

func (r *podRun) hasTokenVolume() bool {
	for _, v := range r.pod.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return true
				}
			}
		}
	}
	return false
}

func (r *podRun) valueFrom(ctx context.Context, c *corev1.Container, vf *corev1.EnvVarSource) (string, bool, error) {
	cli := r.p.c.client.CoreV1()
	ns := r.pod.Namespace
	switch {
	case vf.FieldRef != nil:
		v, err := r.fieldValue(vf.FieldRef.FieldPath)
		return v, false, err
	case vf.ResourceFieldRef != nil:
		return resourceValue(c, vf.ResourceFieldRef), false, nil
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		opt := ref.Optional != nil && *ref.Optional
		cm, err := cli.ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && opt {
				return "", true, nil
			}
			return "", false, fmt.Errorf("configMapKeyRef %s/%s: %w", ns, ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, false, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), false, nil
		}
		if opt {
			return "", true, nil
		}
		return "", false, fmt.Errorf("configMapKeyRef: key %q not found in ConfigMap %s/%s", ref.Key, ns, ref.Name)
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		opt := ref.Optional != nil && *ref.Optional
		s, err := cli.Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) && opt {
				return "", true, nil
			}
			return "", false, fmt.Errorf("secretKeyRef %s/%s: %w", ns, ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), false, nil
		}
		if opt {
			return "", true, nil
		}
		return "", false, fmt.Errorf("secretKeyRef: key %q not found in Secret %s/%s", ref.Key, ns, ref.Name)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// fieldValue resolves a downward-API field path.
func (r *podRun) fieldValue(path string) (string, error) {
	p := r.pod
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "metadata.labels":
		return formatMap(p.Labels), nil
	case "metadata.annotations":
		return formatMap(p.Annotations), nil
	case "spec.nodeName":
		return NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return r.ip, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	for _, pre := range []string{"metadata.labels['", "metadata.annotations['"} {
		if strings.HasPrefix(path, pre) && strings.HasSuffix(path, "']") {
			k := strings.TrimSuffix(strings.TrimPrefix(path, pre), "']")
			if strings.HasPrefix(pre, "metadata.labels") {
				return p.Labels[k], nil
			}
			return p.Annotations[k], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported by the local cluster", path)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// resourceValue resolves resourceFieldRef from the container's limits (else requests,
// else the node's capacity: 2 CPUs, 4Gi), divided by the divisor.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) string {
	name := strings.TrimPrefix(strings.TrimPrefix(ref.Resource, "limits."), "requests.")
	q, ok := c.Resources.Limits[corev1.ResourceName(name)]
	if !ok || strings.HasPrefix(ref.Resource, "requests.") {
		if rq, ok2 := c.Resources.Requests[corev1.ResourceName(name)]; ok2 {
			q, ok = rq, true
		}
	}
	if !ok {
		q = nodeCapacity()[corev1.ResourceName(name)]
	}
	div := ref.Divisor
	if div.IsZero() {
		if name == "cpu" {
			return strconv.FormatInt(q.Value(), 10)
		}
		return strconv.FormatInt(q.Value(), 10)
	}
	if name == "cpu" {
		return strconv.FormatInt((q.MilliValue()+div.MilliValue()-1)/div.MilliValue(), 10)
	}
	return strconv.FormatInt((q.Value()+div.Value()-1)/div.Value(), 10)
}

// expand replaces $(VAR) with the variable's value as Kubernetes does: $$ escapes,
// unknown references stay as written.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func envLookup(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// pathMap maps a path as the container sees it to the host path.
type pathMap struct{ from, to string }

// containerMounts lists the container's volume mounts (and its termination-message
// path) as host paths, longest container path first.
func (r *podRun) containerMounts(cr *ctrRun) []pathMap {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pathMap
	for _, m := range cr.spec.VolumeMounts {
		host, ok := r.volumes[m.Name]
		if !ok {
			continue
		}
		if m.SubPath != "" {
			host = filepath.Join(host, m.SubPath)
			// As the kubelet does, a subPath that does not exist yet is created (not in
			// an image volume, which is read-only).
			if !r.imageVolume(m.Name) {
				_ = os.MkdirAll(host, 0o755)
			}
		}
		out = append(out, pathMap{from: filepath.Clean(m.MountPath), to: host})
	}
	nestMounts(out)
	tm := cr.spec.TerminationMessagePath
	if tm == "" {
		tm = corev1.TerminationMessagePathDefault
	}
	out = append(out, pathMap{from: tm, to: filepath.Join(r.dir, "logs", cr.spec.Name, "termination-log")})
	sort.Slice(out, func(i, j int) bool { return len(out[i].from) > len(out[j].from) })
	return out
}

// imageVolume reports whether the pod's volume name is an image volume.
func (r *podRun) imageVolume(name string) bool {
	for _, v := range r.pod.Spec.Volumes {
		if v.Name == name {
			return v.Image != nil
		}
	}
	return false
}

// nestMounts makes a mount nested in another mount of the same container (the modules
// volume at /etc/workerd/modules inside the config volume at /etc/workerd) visible where
// a kubelet puts it: inside the outer volume's directory, as a symlink to the nested
// volume's directory. Arguments naming the nested path are rewritten to it directly
// (longest prefix first); the symlink serves paths a program resolves relative to a file
// of the outer volume (workerd's embeds, relative to config.capnp).
func nestMounts(mounts []pathMap) {
	for _, in := range mounts {
		var outer *pathMap
		for i, m := range mounts {
			if strings.HasPrefix(in.from, m.from+"/") && (outer == nil || len(m.from) > len(outer.from)) {
				outer = &mounts[i]
			}
		}
		if outer == nil {
			continue
		}
		link := filepath.Join(outer.to, strings.TrimPrefix(in.from, outer.from+"/"))
		if cur, err := os.Readlink(link); err == nil && cur == in.to {
			continue
		}
		_ = os.MkdirAll(filepath.Dir(link), 0o755)
		_ = os.Remove(link) // a stale link or an empty directory (a kubelet's mount point)
		_ = os.Symlink(in.to, link)
	}
}

// rewritePath maps a container path under a mount to its host path; other strings are
// returned unchanged.
func rewritePath(s string, mounts []pathMap) string {
	for _, m := range mounts {
		if s == m.from {
			return m.to
		}
		if strings.HasPrefix(s, m.from+"/") {
			return m.to + s[len(m.from):]
		}
	}
	return s
}

// rewriteArg rewrites a whole argument, or each `=`-separated part of it
// (`--config=/etc/x`, `--directory-path=do=/var/lib/workerd/do`).
func rewriteArg(s string, mounts []pathMap) string {
	if !strings.Contains(s, "/") {
		return s
	}
	parts := strings.Split(s, "=")
	for i, p := range parts {
		parts[i] = rewritePath(p, mounts)
	}
	return strings.Join(parts, "=")
}

// prepareVolumes materializes the pod's volumes under <pod dir>/volumes.
func (r *podRun) prepareVolumes(ctx context.Context) error {
	vols := map[string]string{}
	cli := r.p.c.client.CoreV1()
	ns := r.pod.Namespace
	for _, v := range r.pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			if err := mkdirs(dir); err != nil {
				return err
			}
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if err := mkdirs(dir); err != nil {
				return err
			}
			if err := r.writeProjection(ctx, dir, v); err != nil {
				return fmt.Errorf("volume %q: %w", v.Name, err)
			}
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			pvc, err := cli.PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("volume %q: persistentVolumeClaim %s/%s: %w", v.Name, ns, claim, err)
			}
			if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
				return fmt.Errorf("volume %q: persistentVolumeClaim %s/%s is %s, not Bound", v.Name, ns, claim, pvc.Status.Phase)
			}
			pv, err := cli.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("volume %q: persistentVolume %s: %w", v.Name, pvc.Spec.VolumeName, err)
			}
			switch {
			case pv.Spec.HostPath != nil:
				dir = pv.Spec.HostPath.Path
			case pv.Spec.Local != nil:
				dir = pv.Spec.Local.Path
			default:
				return fmt.Errorf("volume %q: persistentVolume %s is neither hostPath nor local", v.Name, pv.Name)
			}
			if err := mkdirs(dir); err != nil {
				return err
			}
		case v.HostPath != nil:
			dir = v.HostPath.Path
		case v.Image != nil:
			// The image's filesystem, from the image mapping's volumes (unpacked once
			// into the cache); shared by every pod using the image, never written here.
			d, err := r.p.c.cfg.Images.Directory(v.Image.Reference)
			if err != nil {
				return fmt.Errorf("volume %q: %w", v.Name, err)
			}
			dir = d
		default:
			return fmt.Errorf("volume %q: type not supported by the local cluster (supported: emptyDir, configMap, secret, downwardAPI, projected, persistentVolumeClaim, hostPath, image)", v.Name)
		}
		vols[v.Name] = dir
	}
	if r.hasTokenVolume() {
		kc := filepath.Join(r.dir, "kubeconfig")
		if err := r.writePodKubeconfig(ctx, kc); err != nil {
			return err
		}
		vols[kubeconfigVolume] = kc
	}
	r.mu.Lock()
	r.volumes = vols
	r.mu.Unlock()
	return nil
}

// projection writes one configMap, secret, downwardAPI or projected volume into a
// directory, as a kubelet does.
type projection struct {
	ctx context.Context
	r   *podRun
	dir string
}

func (r *podRun) writeProjection(ctx context.Context, dir string, v corev1.Volume) error {
	p := projection{ctx: ctx, r: r, dir: dir}
	switch {
	case v.ConfigMap != nil:
		return p.configMap(v.ConfigMap.Name, v.ConfigMap.Optional, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
	case v.Secret != nil:
		return p.secret(v.Secret.SecretName, v.Secret.Optional, v.Secret.Items, v.Secret.DefaultMode)
	case v.DownwardAPI != nil:
		return p.downward(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if err := p.source(s, v.Projected.DefaultMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// source writes one source of a projected volume; every source shares the
// volume's default mode.
func (p projection) source(s corev1.VolumeProjection, mode *int32) error {
	switch {
	case s.ConfigMap != nil:
		return p.configMap(s.ConfigMap.Name, s.ConfigMap.Optional, s.ConfigMap.Items, mode)
	case s.Secret != nil:
		return p.secret(s.Secret.Name, s.Secret.Optional, s.Secret.Items, mode)
	case s.DownwardAPI != nil:
		return p.downward(s.DownwardAPI.Items, mode)
	case s.ServiceAccountToken != nil:
		tok, err := p.r.token(p.ctx, s.ServiceAccountToken.Audience, s.ServiceAccountToken.ExpirationSeconds)
		if err != nil {
			return err
		}
		return p.writeFile(s.ServiceAccountToken.Path, []byte(tok), mode)
	}
	return nil
}

// configMap writes a configMap's data and binary data; a missing optional one
// writes nothing.
func (p projection) configMap(name string, optional *bool, items []corev1.KeyToPath, mode *int32) error {
	ns := p.r.pod.Namespace
	cm, err := p.r.p.c.client.CoreV1().ConfigMaps(ns).Get(p.ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("configMap %s/%s: %w", ns, name, err)
	}
	d := map[string][]byte{}
	for k, s := range cm.Data {
		d[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		d[k] = b
	}
	return p.writeData(d, items, mode, "configMap "+name)
}

// secret writes a secret's data; a missing optional one writes nothing.
func (p projection) secret(name string, optional *bool, items []corev1.KeyToPath, mode *int32) error {
	ns := p.r.pod.Namespace
	s, err := p.r.p.c.client.CoreV1().Secrets(ns).Get(p.ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return p.writeData(s.Data, items, mode, "secret "+name)
}

// writeData writes every key, or only the listed items (then each must exist).
func (p projection) writeData(data map[string][]byte, items []corev1.KeyToPath, mode *int32, what string) error {
	if len(items) == 0 {
		for k, b := range data {
			if err := p.writeFile(k, b, mode); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s: key %q not found", what, it.Key)
		}
		if err := p.writeFile(it.Path, b, itemMode(it.Mode, mode)); err != nil {
			return err
		}
	}
	return nil
}

// downward writes downward-API files: pod fields or container resources.
func (p projection) downward(items []corev1.DownwardAPIVolumeFile, mode *int32) error {
	for _, it := range items {
		var val string
		switch {
		case it.FieldRef != nil:
			v, err := p.r.fieldValue(it.FieldRef.FieldPath)
			if err != nil {
				return err
			}
			val = v
		case it.ResourceFieldRef != nil:
			val = resourceValue(p.r.container(it.ResourceFieldRef.ContainerName), it.ResourceFieldRef)
		}
		if err := p.writeFile(it.Path, []byte(val), itemMode(it.Mode, mode)); err != nil {
			return err
		}
	}
	return nil
}

// container returns the pod's container of that name, or an empty one so that
// resource lookups see no requests or limits.
func (r *podRun) container(name string) *corev1.Container {
	for i := range r.pod.Spec.Containers {
		if r.pod.Spec.Containers[i].Name == name {
			return &r.pod.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}

// itemMode is an item's own mode, else the volume's default.
func itemMode(item, def *int32) *int32 {
	if item != nil {
		return item
	}
	return def
}

// writeFile writes rel below the projection's directory; rel cannot climb out.
// A set mode keeps the owner readable.
func (p projection) writeFile(rel string, data []byte, mode *int32) error {
	path := filepath.Join(p.dir, filepath.Clean("/"+rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	m := os.FileMode(0o644)
	if mode != nil {
		m = os.FileMode(*mode) | 0o400
	}
	return os.WriteFile(path, data, m)
}

// token requests a service-account token bound to the pod (TokenRequest API).
func (r *podRun) token(ctx context.Context, audience string, exp *int64) (string, error) {
	sa := r.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.pod.Name, UID: r.pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	if exp == nil {
		d := int64(24 * 3600)
		req.Spec.ExpirationSeconds = &d
	}
	out, err := r.p.c.client.CoreV1().ServiceAccounts(r.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("service account token for %s/%s: %w", r.pod.Namespace, sa, err)
	}
	return out.Status.Token, nil
}

// writePodKubeconfig writes a kubeconfig for the pod's service account (in-cluster
// clients find it through KUBECONFIG, since /var/run/secrets is not on the host).
func (r *podRun) writePodKubeconfig(ctx context.Context, path string) error {
	tok, err := r.token(ctx, "", nil)
	if err != nil {
		return err
	}
	tokFile := filepath.Join(r.dir, "token")
	if err := os.WriteFile(tokFile, []byte(tok), 0o600); err != nil {
		return err
	}
	ca, _ := os.ReadFile(r.p.c.pki.CAFile)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: pod
  user:
    tokenFile: %s
contexts:
- name: pod
  context: {cluster: devcluster, user: pod, namespace: %s}
current-context: pod
`, r.p.c.apiURL, b64(ca), tokFile, r.pod.Namespace)
	return os.WriteFile(path, []byte(kc), 0o600)
}
