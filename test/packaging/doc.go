// Package packaging tests what users install besides the chart (internal/chart tests the
// chart): the Argo CD health checks and Application of config/argocd. The health checks'
// Lua is read out of the committed config/argocd/argocd-cm-health.yaml and run with
// gopher-lua, the interpreter Argo CD uses, over the fixtures in testdata/health for each
// of the kinds.
package packaging
