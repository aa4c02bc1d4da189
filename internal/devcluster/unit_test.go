package devcluster

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "127.1.0.2", "EMPTY": ""}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"--socket-addr=http=$(POD_IP):8080", "--socket-addr=http=127.1.0.2:8080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"a$(EMPTY)b", "ab"},
		{"$(unterminated", "$(unterminated"},
		{"$5", "$5"},
	} {
		if got := expand(tc.in, look); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRewriteArg(t *testing.T) {
	mounts := []pathMap{{"/etc/workerd/modules", "/h/mods"}, {"/etc/workerd", "/h/cfg"}, {"/var/lib/workerd/do", "/h/do"}}
	for _, tc := range []struct{ in, want string }{
		{"/etc/workerd/config.capnp", "/h/cfg/config.capnp"},
		{"/etc/workerd", "/h/cfg"},
		{"/etc/workerd/modules/a.js", "/h/mods/a.js"},
		{"--directory-path=do=/var/lib/workerd/do", "--directory-path=do=/h/do"},
		{"/etc/workerdx", "/etc/workerdx"},
		{"serve", "serve"},
	} {
		if got := rewriteArg(tc.in, mounts); got != tc.want {
			t.Errorf("rewriteArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStripTag(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ghcr.io/workerd-operator/workerd:1.20261117.1", "ghcr.io/workerd-operator/workerd"},
		{"localhost:5000/x@sha256:abc", "localhost:5000/x"},
		{"localhost:5000/x", "localhost:5000/x"},
	} {
		if got := stripTag(tc.in); got != tc.want {
			t.Errorf("stripTag(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
