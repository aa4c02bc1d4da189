package podcontract

// ContainerInstanceContainer is the one container of a container instance pod: the
// Pod the manager runs for one instance of a Durable Object class that extends Container
// (internal/containers, labels in labels.go).
const ContainerInstanceContainer = "container"

// ContainersAPIShortHost is the containers API Service's name without the cluster
// domain, which its server certificate also names: "<service>.<ns>.svc".
func ContainersAPIShortHost(ns string) string {
	return ContainersAPIService + "." + ns + ".svc"
}
