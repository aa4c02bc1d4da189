// Package geoiptest writes small GeoIP databases in MaxMind's format (with
// github.com/maxmind/mmdbwriter) holding known networks, for the tests of request.cf:
// a City database and an ASN database, as MaxMind ships them. Tests only.
package geoiptest

import (
	"net"
	"os"
	"path/filepath"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Network is one network of the test databases and the request.cf fields a client in
// it gets (Cloudflare's formats: latitude and longitude as strings with 5 decimals).
type Network struct {
	CIDR string
	// An address in CIDR, for requests.
	Addr string
	City mmdbtype.Map
	ASN  mmdbtype.Map
	// Want are the request.cf fields the databases give an address of CIDR.
	Want map[string]any
}

func names(en string) mmdbtype.Map {
	return mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(en)}}
}

// Networks are the test databases' networks: documentation ranges (RFC 5737) and a
// loopback address (the local cluster's pods and clients are loopback addresses).
var Networks = []Network{{
	CIDR: "203.0.113.0/24", Addr: "203.0.113.7",
	City: mmdbtype.Map{
		"city":      names("Berlin"),
		"continent": mmdbtype.Map{"code": mmdbtype.String("EU")},
		"country":   mmdbtype.Map{"iso_code": mmdbtype.String("DE"), "is_in_european_union": mmdbtype.Bool(true)},
		"location": mmdbtype.Map{"latitude": mmdbtype.Float64(52.52437), "longitude": mmdbtype.Float64(13.41053),
			"time_zone": mmdbtype.String("Europe/Berlin")},
		"postal":       mmdbtype.Map{"code": mmdbtype.String("10178")},
		"subdivisions": mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String("BE"), "names": mmdbtype.Map{"en": mmdbtype.String("Land Berlin")}}},
	},
	ASN: mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(64500), "autonomous_system_organization": mmdbtype.String("Example Transit")},
	Want: map[string]any{"city": "Berlin", "continent": "EU", "country": "DE", "isEUCountry": "1", "latitude": "52.52437",
		"longitude": "13.41053", "timezone": "Europe/Berlin", "postalCode": "10178", "region": "Land Berlin", "regionCode": "BE",
		"asn": float64(64500), "asOrganization": "Example Transit"},
}, {
	CIDR: "198.51.100.0/24", Addr: "198.51.100.20",
	City: mmdbtype.Map{
		"city":      names("Austin"),
		"continent": mmdbtype.Map{"code": mmdbtype.String("NA")},
		"country":   mmdbtype.Map{"iso_code": mmdbtype.String("US")},
		"location": mmdbtype.Map{"latitude": mmdbtype.Float64(30.2713), "longitude": mmdbtype.Float64(-97.7426),
			"time_zone": mmdbtype.String("America/Chicago"), "metro_code": mmdbtype.Uint16(635)},
		"postal":       mmdbtype.Map{"code": mmdbtype.String("78701")},
		"subdivisions": mmdbtype.Slice{mmdbtype.Map{"iso_code": mmdbtype.String("TX"), "names": mmdbtype.Map{"en": mmdbtype.String("Texas")}}},
	},
	Want: map[string]any{"city": "Austin", "continent": "NA", "country": "US", "latitude": "30.27130", "longitude": "-97.74260",
		"timezone": "America/Chicago", "metroCode": "635", "postalCode": "78701", "region": "Texas", "regionCode": "TX"},
}, {
	// The e2e suite's untrusted client (a loopback source address of its own).
	CIDR: "127.0.0.77/32", Addr: "127.0.0.77",
	City: mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String("NZ")}, "continent": mmdbtype.Map{"code": mmdbtype.String("OC")},
		"location": mmdbtype.Map{"latitude": mmdbtype.Float64(-41.28664), "longitude": mmdbtype.Float64(174.77557), "time_zone": mmdbtype.String("Pacific/Auckland")}},
	ASN:  mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(64501)},
	Want: map[string]any{"country": "NZ", "continent": "OC", "latitude": "-41.28664", "longitude": "174.77557", "timezone": "Pacific/Auckland", "asn": float64(64501)},
}}

// Write writes GeoIP2-City.mmdb and GeoLite2-ASN.mmdb with Networks into dir.
func Write(dir string) error {
	for file, pick := range map[string]func(Network) mmdbtype.Map{
		"GeoIP2-City.mmdb":  func(n Network) mmdbtype.Map { return n.City },
		"GeoLite2-ASN.mmdb": func(n Network) mmdbtype.Map { return n.ASN },
	} {
		tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: file[:len(file)-len(".mmdb")], IncludeReservedNetworks: true})
		if err != nil {
			return err
		}
		for _, n := range Networks {
			if pick(n) == nil {
				continue
			}
			_, ipnet, err := net.ParseCIDR(n.CIDR)
			if err != nil {
				return err
			}
			if err := tree.Insert(ipnet, pick(n)); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		if _, err := tree.WriteTo(f); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
