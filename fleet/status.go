package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is the fleet as etcd holds it now.
type Status struct {
	Revision       int64                          // etcd's, when read
	ConfigRevision int64                          // of P/config; 0: none
	Proxies        []Registration                 // live proxies, by id
	Rings          map[string]Ring                // P/ring values, by pool
	Reports        map[string]map[string][]string // pool -> server -> ids reporting it failing
	Bad            []string                       // keys whose values could not be read
}

// ReadStatus reads every key under prefix.
func ReadStatus(ctx context.Context, cli *clientv3.Client, prefix string) (*Status, error) {
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("fleet: read %s/: %w", prefix, err)
	}
	st := &Status{Revision: resp.Header.Revision, Rings: map[string]Ring{}, Reports: map[string]map[string][]string{}}
	for _, kv := range resp.Kvs {
		st.add(prefix, string(kv.Key), kv.Value, kv.ModRevision)
	}
	for _, kv := range resp.Kvs {
		st.addStatus(prefix, string(kv.Key), kv.Value)
	}
	sort.Slice(st.Proxies, func(i, j int) bool { return st.Proxies[i].ID < st.Proxies[j].ID })
	return st, nil
}

// addStatus folds P/status/<id> into the registration of proxy id; a
// status without a live registration is left out.
func (st *Status) addStatus(prefix, key string, value []byte) {
	id, ok := strings.CutPrefix(key, prefix+"/status/")
	if !ok {
		return
	}
	for i := range st.Proxies {
		if st.Proxies[i].ID != id {
			continue
		}
		if err := json.Unmarshal(value, &st.Proxies[i].ProxyStatus); err != nil {
			st.Bad = append(st.Bad, key)
		}
	}
}

func (st *Status) add(prefix, key string, value []byte, modRev int64) {
	rest := strings.TrimPrefix(key, prefix+"/")
	dir, name, _ := strings.Cut(rest, "/")
	switch dir {
	case "config":
		st.ConfigRevision = modRev
	case "proxies":
		var r Registration
		if err := json.Unmarshal(value, &r); err != nil {
			st.Bad = append(st.Bad, key)
			return
		}
		st.Proxies = append(st.Proxies, r)
	case "ring":
		r, err := parseRing(value)
		pool, uerr := url.PathUnescape(name)
		if err != nil || uerr != nil {
			st.Bad = append(st.Bad, key)
			return
		}
		st.Rings[pool] = r
	case "health":
		p, ok := keyParts(rest, "health/", 3)
		if !ok {
			st.Bad = append(st.Bad, key)
			return
		}
		pool, _ := url.PathUnescape(p[0])
		server, _ := url.PathUnescape(p[1])
		if st.Reports[pool] == nil {
			st.Reports[pool] = map[string][]string{}
		}
		st.Reports[pool][server] = append(st.Reports[pool][server], p[2])
	}
}
