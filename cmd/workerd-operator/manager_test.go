package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// The manager's /metrics answers only callers the API server authenticates and
// authorizes for GET /metrics: no token 401, a token the API server rejects 500
// (controller-runtime's filter answers its TokenReview error so), a token without the
// metrics-reader role 403, with it 200.
func TestManagerMetricsAuthenticated(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an API server")
	}
	env, err := testenv.NewEnvironment()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := testenv.StartEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	addr := testenv.FreeLoopbackAddr(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(managerMetricsOptions(addr), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Start(ctx) }()
	cs := kubernetes.NewForConfigOrDie(cfg)
	reader, stranger := saToken(t, cs, "reader"), saToken(t, cs, "stranger")
	bindMetricsReader(t, cs, "reader")
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"no token", "", 401}, {"a made-up token", "nope", 500}, {"a ServiceAccount without the role", stranger, 403}, {"the metrics reader", reader, 200}} {
		if got := getMetrics(t, addr, tc.token); got != tc.want {
			t.Errorf("%s: GET /metrics %d, want %d", tc.who, got, tc.want)
		}
	}
}

func getMetrics(t *testing.T, addr, token string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var last error
	for range 50 { // the server is starting
		req, _ := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			last = err
			time.Sleep(100 * time.Millisecond)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Fatalf("GET /metrics: %v", last)
	return 0
}

func saToken(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bindMetricsReader gives ServiceAccount default/name the rule of
// config/rbac/metrics_reader_role.yaml.
func bindMetricsReader(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: name}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
