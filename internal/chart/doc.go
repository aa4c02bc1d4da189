// Package chart loads and renders the Helm chart charts/workerd-operator with the Helm
// Go SDK (helm.sh/helm/v3), as `helm template` does: the chart's values.schema.json is
// enforced, no cluster is contacted (the chart uses no `lookup` and no hooks). The tests
// here render every documented option set and apply the result server-side (dry-run) to
// a real kube-apiserver (internal/testenv); test/e2e installs the chart on the local
// cluster with the same Load.
package chart
