package main

import (
	"github.com/spf13/pflag"

	"github.com/workerd-operator/workerd-operator/internal/requestcf"
)

// requestCFFlags are the --request-cf-* flags the manager and the sidecar share
// (docs/request-cf.md): the manager passes colo and trusted proxies on to every Worker
// pod's sidecar; the manager's GeoIP image becomes the sidecar's GeoIP directory.
type requestCFFlags struct {
	colo           string
	trustedProxies []string
	geoipDir       string
}

func (f *requestCFFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.colo, "request-cf-colo", "", "request.cf.colo of every request (Cloudflare: the data center's IATA code), e.g. the cluster's or zone's name; empty leaves it out (docs/request-cf.md)")
	fl.StringSliceVar(&f.trustedProxies, "request-cf-trusted-proxies", nil, "CIDRs of the proxies (Ingress controllers, load balancers) whose CF-Connecting-IP and X-Forwarded-For name the client; any other peer is the client (docs/request-cf.md)")
}

// config is the requestcf.Config of the flags, without the GeoIP databases.
func (f *requestCFFlags) config() (*requestcf.Config, error) {
	trusted, err := requestcf.ParseTrustedProxies(f.trustedProxies)
	if err != nil {
		return nil, err
	}
	return &requestcf.Config{Colo: f.colo, TrustedProxies: trusted}, nil
}
