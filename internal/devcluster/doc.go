// Package devcluster runs a one-machine Kubernetes cluster whose pods are local
// processes: `workerd-operator dev` (make dev) and the end-to-end tests (test/e2e) use it.
//
// # What runs
//
// Start launches, under one run directory (default `.dev` in the repository):
//   - etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from the Go
//     modules by hack/build-control-plane.sh (testenv.ControlPlaneDir), on free ports of
//     127.0.0.1, with a CA, serving and client certificates and a service-account key pair
//     generated at start (`<dir>/pki`), and an admin kubeconfig at `<dir>/kubeconfig`;
//   - one node, `devcluster`, served in-process by the virtual-kubelet library
//     (github.com/virtual-kubelet/virtual-kubelet/node/nodeutil) with a provider that runs
//     each container of a scheduled pod as a local process;
//   - a PersistentVolume provisioner (sigs.k8s.io/sig-storage-lib-external-provisioner/v13)
//     for the default StorageClass `devcluster-hostpath`: each claim is a directory under
//     `<dir>/volumes`, with node affinity to the one node;
//   - a userspace service proxy: each Service gets a virtual address in 127.2.0.0/16 (see
//     below for a second cluster on the same machine) and a
//     listener on every Service port there, forwarding TCP to ready endpoints.
//
// # Images
//
// Pods never set `command` (docs/pod-contract.md), so an image stands only for an
// entrypoint. The image mapping file (config/dev/images.yaml, see ImageMapping) maps an
// image reference (prefix, `*` suffix wildcard) to a local binary. A pod whose image has no
// mapping fails with reason ErrImageNeverPull and a message naming the image and the file.
//
// An image volume (`volumes[].image`, the modules of a Worker with `source.image`) is a
// directory: the mapping's `volumes` entries map an image reference to a directory, or to
// an OCI image layout (tar or directory) unpacked once into <cache>/image-volumes; mounts
// of it (with their subPath) are rewritten like every other volume.
//
// # Addresses and names
//
// Every pod gets its own address in 127.1.0.0/16 (PodIP). A second cluster running on
// the same machine at the same time (a `make dev` during `make test`) takes the next
// free address slot (slot.go): pods in 127.3.0.0/16, Services in 127.4.0.0/16, and so on.
// `status.podIP` in the downward
// API is that address, and containers bind to it ($(POD_IP)). Cluster names
// (`<svc>.<ns>.svc.cluster.local`, `<pod>.<headless-svc>.<ns>.svc.cluster.local`, and the
// short forms `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc` are not resolved: use the full name) are
// written into a hosts file (`<dir>/hosts`, regenerated in place from Services and
// EndpointSlices). Each container process runs in its own unprivileged user + mount
// namespace (CLONE_NEWUSER|CLONE_NEWNS, the caller's uid mapped to 0) in which that file is
// bind-mounted over /etc/hosts, so glibc's resolver (which re-reads /etc/hosts on every
// lookup) resolves cluster names without a DNS server on port 53. A ClusterIP Service name
// resolves to its virtual address, a headless one to its ready pod addresses.
//
// # Paths
//
// Processes run on the host file system. Volumes are materialized as directories under
// `<dir>/pods/<ns>_<pod>_<uid>/volumes/<volume>`; every mountPath prefix (e.g.
// `/etc/workerd`) found at the start of an argument, of an env value, of a `key=value`
// argument's value, or of the working directory is rewritten to the materialized host
// directory. Configuration files inside volumes are not rewritten: pods pass absolute paths
// by argument (workerd's `--directory-path`), as the pod contract requires. A volume
// mounted inside another volume's mount path (the modules volume at /etc/workerd/modules
// inside the config volume at /etc/workerd) is also reachable through the outer volume's
// directory, by a symlink, so paths resolved relative to a file of the outer volume
// (workerd's embeds, relative to config.capnp) find it as they do on a kubelet. A pod that
// mounts a service-account token also gets KUBECONFIG (a kubeconfig with a token from the
// TokenRequest API) and KUBERNETES_SERVICE_HOST/PORT pointing at the API server.
//
// # Limits
//
// No resource limits, no image pulls, no exec/attach/port-forward, no network policies,
// ConfigMap/Secret volumes are written once per container start (not refreshed live).
// See docs/local-cluster.md.
package devcluster
