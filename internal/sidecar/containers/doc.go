// Package containers serves the subset of the Docker Engine API that workerd's
// `containerEngine = (localDocker = ...)` uses for Durable Object containers
// (ctx.container), on a unix socket in the pod's sidecar (docs/containers.md).
//
// workerd creates two Docker containers per Durable Object: the app, and a
// "<app>-proxy" networking sidecar (Cloudflare's egress interceptor) whose published
// port 39001 is the only way in: workerd sends `CONNECT 127.0.0.1:P` there and expects
// the proxy to dial port P inside the app's network namespace. Here the proxy is
// virtual: a loopback listener per proxy that dials the app's Backend host instead, so
// the interceptor image never runs. App containers are run by a Backend (in production,
// Kubernetes Pods created through the operator).
//
// Docker semantics workerd relies on are kept: creating an existing name is 409, an
// exited container's record stays until DELETE (workerd restarts by 409 → DELETE →
// create), POST /wait long-polls for the exit code, and the kill signal decides
// between a graceful and an immediate stop. Everything else answers 501.
package containers
