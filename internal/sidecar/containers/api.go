package containers

import "encoding/json"

// The JSON shapes below are the fields of Docker Engine API objects that workerd reads
// or writes (its docker-api.capnp); its decoder ignores fields it does not know.

// createRequest is the body of POST /containers/create.
type createRequest struct {
	Image        string
	Cmd          []string
	Entrypoint   []string
	Env          []string
	ExposedPorts map[string]struct{}
	HostConfig   hostConfig
}

type hostConfig struct {
	Binds       []string
	Mounts      []json.RawMessage
	CapAdd      []string
	Devices     []json.RawMessage
	SecurityOpt []string
	Privileged  bool
	PidMode     string // workerd asks for "host"; ignored, an app never shares the pod's PIDs
	NetworkMode string
}

type createResponse struct {
	Id       string
	Warnings []string
}

type inspectResponse struct {
	Id              string
	Name            string
	Created         string
	State           containerState
	Config          containerConfig
	NetworkSettings networkSettings
}

type containerState struct {
	Status     string // created, running, removing, exited
	Running    bool
	Restarting bool
	ExitCode   int
	Error      string
	StartedAt  string
	FinishedAt string
}

type containerConfig struct {
	Image string
	Cmd   []string
	Env   []string
}

type networkSettings struct {
	Ports map[string][]portBinding
}

type portBinding struct {
	HostIp   string
	HostPort string
}

type waitResponse struct {
	StatusCode int
	Error      *waitError `json:",omitempty"`
}

type waitError struct {
	Message string
}

type network struct {
	Name   string
	Id     string
	Driver string
	IPAM   ipam
}

type ipam struct {
	Driver string
	Config []ipamConfig
}

type ipamConfig struct {
	Subnet  string
	Gateway string
}

type volumeList struct {
	Volumes  []struct{}
	Warnings []string
}

type errorResponse struct {
	Message string `json:"message"`
}

// egressConfig is the body of PUT /egress on a -proxy's ingress port.
type egressConfig struct {
	Port     int
	Internet struct {
		Enabled bool `json:"enabled"`
	} `json:"internet"`
}
