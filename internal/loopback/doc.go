// Package loopback hands out loopback listen addresses for processes the operator's
// tools and tests start on one machine (workerd sockets, sidecars).
//
// A port that was free a moment ago on 127.0.0.1 can be taken before the process that
// was given it binds: by any :0 bind or outgoing connection on the machine, which draw
// ports from the same ephemeral range (CI runs test packages in parallel, each starting
// workerd, kube-apiserver and etcd). FreeAddr therefore picks a random address in
// 127.128.0.0/9 as well as a free port, so another process's 127.0.0.1 ports never
// collide with it. The local cluster (internal/devcluster) keeps to 127.1.0.0–
// 127.64.255.255 for its pods and Services.
package loopback
