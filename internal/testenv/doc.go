// Package testenv locates what the tests need on this machine: the repository root,
// the reference texts some tests compare against (SharedDir), the pinned workerd binary and the
// control-plane binaries built by hack/. It installs missing pieces through the same
// hack/ scripts `make test` uses, so a test run from a clean clone needs nothing else.
// NetworkPolicies evaluates NetworkPolicy objects where nothing enforces them.
package testenv
