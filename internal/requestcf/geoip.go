package requestcf

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/oschwald/maxminddb-golang/v2"
)

// record holds what request.cf takes from MaxMind's GeoIP2/GeoLite2 City, Country and
// ASN databases (https://dev.maxmind.com/geoip/docs/databases/city-and-country/,
// .../asn/); a database fills the parts it has.
type record struct {
	City struct {
		Names map[string]string `maxminddb:"names"`
	} `maxminddb:"city"`
	Continent struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"continent"`
	Country struct {
		ISOCode           string `maxminddb:"iso_code"`
		IsInEuropeanUnion bool   `maxminddb:"is_in_european_union"`
	} `maxminddb:"country"`
	Location struct {
		Latitude  *float64 `maxminddb:"latitude"`
		Longitude *float64 `maxminddb:"longitude"`
		MetroCode uint     `maxminddb:"metro_code"`
		TimeZone  string   `maxminddb:"time_zone"`
	} `maxminddb:"location"`
	Postal struct {
		Code string `maxminddb:"code"`
	} `maxminddb:"postal"`
	Subdivisions []struct {
		ISOCode string            `maxminddb:"iso_code"`
		Names   map[string]string `maxminddb:"names"`
	} `maxminddb:"subdivisions"`
	ASN          uint   `maxminddb:"autonomous_system_number"`
	Organization string `maxminddb:"autonomous_system_organization"`
}

// OpenGeoIPDir opens every *.mmdb file of dir, in name order. An empty dir is no
// database.
func OpenGeoIPDir(dir string) ([]*maxminddb.Reader, error) {
	if dir == "" {
		return nil, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.mmdb"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("--request-cf-geoip-dir (docs/request-cf.md): %w", err)
		}
		return nil, fmt.Errorf("--request-cf-geoip-dir %s: no *.mmdb file (MaxMind DB format, docs/request-cf.md)", dir)
	}
	sort.Strings(files)
	var out []*maxminddb.Reader
	for _, f := range files {
		r, err := maxminddb.Open(f)
		if err != nil {
			for _, o := range out {
				_ = o.Close()
			}
			return nil, fmt.Errorf("--request-cf-geoip-dir: %s is not a MaxMind DB file (docs/request-cf.md): %w", f, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// geo adds to cf what the databases know of a: a field the first database has wins.
func (c *Config) geo(a netip.Addr, cf map[string]any) error {
	var errs []error
	for _, db := range c.GeoIP {
		var r record
		res := db.Lookup(a)
		if !res.Found() {
			if err := res.Err(); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := res.Decode(&r); err != nil {
			errs = append(errs, err)
			continue
		}
		r.fill(cf)
	}
	return errors.Join(errs...)
}

// fill sets cf's geographic and network fields from r, where r has them and cf not
// yet. The formats are Cloudflare's: latitude and longitude as decimal strings,
// metroCode as a string, isEUCountry "1" or absent.
func (r *record) fill(cf map[string]any) {
	set := func(k string, v any, ok bool) {
		if _, had := cf[k]; ok && !had {
			cf[k] = v
		}
	}
	set("asn", r.ASN, r.ASN != 0)
	set("asOrganization", r.Organization, r.Organization != "")
	set("country", r.Country.ISOCode, r.Country.ISOCode != "")
	set("isEUCountry", "1", r.Country.IsInEuropeanUnion)
	set("continent", r.Continent.Code, r.Continent.Code != "")
	set("city", r.City.Names["en"], r.City.Names["en"] != "")
	set("postalCode", r.Postal.Code, r.Postal.Code != "")
	if l := r.Location; l.Latitude != nil && l.Longitude != nil {
		set("latitude", strconv.FormatFloat(*l.Latitude, 'f', 5, 64), true)
		set("longitude", strconv.FormatFloat(*l.Longitude, 'f', 5, 64), true)
	}
	set("timezone", r.Location.TimeZone, r.Location.TimeZone != "")
	set("metroCode", strconv.FormatUint(uint64(r.Location.MetroCode), 10), r.Location.MetroCode != 0)
	if len(r.Subdivisions) > 0 {
		s := r.Subdivisions[0]
		set("region", s.Names["en"], s.Names["en"] != "")
		set("regionCode", s.ISOCode, s.ISOCode != "")
	}
}
