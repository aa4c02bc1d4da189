package podcontract

import "strconv"

// The container engine of Durable Object shards whose class runs containers
// (docs/containers.md): workerd speaks Docker's API to the sidecar on a unix socket in
// a volume the two containers share.
const (
	// ContainersSubdir is where that volume is mounted, relative to ConfigDir, the
	// workerd container's working directory: the config names the socket by a relative
	// path, as it does the assets (the local cluster moves mounts, never the config's text).
	ContainersSubdir = "containers"
	// ContainersDir is the volume's mount path in both containers.
	ContainersDir = ConfigDir + "/" + ContainersSubdir
	// ContainersSocket is the socket's file name in ContainersDir.
	ContainersSocket = "docker.sock"
	// ContainersVolume is the shared emptyDir's name.
	ContainersVolume = "containers"
	// ContainersEgressImage is the image workerd names for each instance's egress
	// companion. The sidecar plays that companion itself, so nothing ever pulls it.
	ContainersEgressImage = "workerd-operator.invalid/virtual-egress"
)

// The manager's container API: shard sidecars ask it, over mutual TLS, to run each
// instance as a Pod (internal/containers).
const (
	// ContainersAPIPort is the manager's listener for it.
	ContainersAPIPort = 9446
	// ContainersAPIService is the manager's Service for it, in the manager's namespace.
	ContainersAPIService = "workerd-operator-containers"
)

// ContainersAPIHost is the container API Service's fully qualified name when the
// manager runs in namespace ns of a cluster with DNS domain domain (cluster.local).
func ContainersAPIHost(ns, domain string) string {
	return ContainersAPIService + "." + ns + ".svc." + domain
}

// ContainersAPIURL is the container API's base URL (ContainersAPIHost).
func ContainersAPIURL(ns, domain string) string {
	return "https://" + ContainersAPIHost(ns, domain) + ":" + strconv.Itoa(ContainersAPIPort)
}

// ContainerInstanceContainer is the one container of a container instance pod: the
// Pod the manager runs for one instance of a Durable Object class that extends Container
// (internal/containers, labels in labels.go).
const ContainerInstanceContainer = "container"

// ContainersAPIShortHost is the containers API Service's name without the cluster
// domain, which its server certificate also names: "<service>.<ns>.svc".
func ContainersAPIShortHost(ns string) string {
	return ContainersAPIService + "." + ns + ".svc"
}
