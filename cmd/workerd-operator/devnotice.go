package main

// devIsolationNotice is printed with the URLs: the local cluster runs pods as processes of
// this machine, so it isolates no tenant from another.
const devIsolationNotice = "dev: no tenant isolation: pods are processes of this machine sharing its loopback and files, so any pod can reach " +
	"another's loopback-only ports and no NetworkPolicy applies; use a real cluster for more than one tenant (docs/local-cluster.md#limits-what-a-real-kubelet-does-and-this-does-not)"
