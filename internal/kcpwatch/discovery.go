package kcpwatch

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
)

// SharedDiscovery gives every workspace of one virtual workspace the same REST mapper.
//
// kcp's multicluster-provider runs discovery once per engaged workspace, a large share
// of what serving a new workspace costs (measured: docs/design/kcp-mode.md, "One REST
// mapper"). The virtual workspace of an APIExport serves the same resources into every
// workspace bound to it (the export's own and the claimed ones), so one mapper that
// discovers through the wildcard endpoint `<vw>/clusters/*` answers for all of them. A claim a
// tenant did not accept changes what the server allows, not what the resources are
// called; such requests still fail, with the server's answer.
type SharedDiscovery struct {
	mu      sync.Mutex
	mappers map[string]meta.RESTMapper // by wildcard URL (one per virtual workspace shard)
}

// NewSharedDiscovery returns an empty SharedDiscovery.
func NewSharedDiscovery() *SharedDiscovery {
	return &SharedDiscovery{mappers: map[string]meta.RESTMapper{}}
}

// Wrap returns cl with its client and REST mapper replaced by ones using the mapper
// shared by its virtual workspace. Reads still go through cl's cache; everything else
// (cache, events, HTTP client) is cl's own.
func (d *SharedDiscovery) Wrap(cl ctrlcluster.Cluster) (ctrlcluster.Cluster, error) {
	mapper, err := d.mapperFor(cl)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cl.GetConfig(), client.Options{
		Scheme: cl.GetScheme(), HTTPClient: cl.GetHTTPClient(), Mapper: mapper,
		Cache: &client.CacheOptions{Reader: cl.GetCache()},
	})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cl.GetConfig().Host, err)
	}
	return &sharedMapperCluster{Cluster: cl, client: c, mapper: mapper}, nil
}

func (d *SharedDiscovery) mapperFor(cl ctrlcluster.Cluster) (meta.RESTMapper, error) {
	host := cl.GetConfig().Host
	i := strings.LastIndex(host, "/clusters/")
	if i < 0 {
		return nil, fmt.Errorf("%s is not a workspace URL of a virtual workspace", host)
	}
	wildcard := host[:i] + "/clusters/*"
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.mappers[wildcard]; ok {
		return m, nil
	}
	cfg := rest.CopyConfig(cl.GetConfig())
	cfg.Host = wildcard
	// The HTTP client carries no host, only transport and credentials: the cluster's
	// serves the wildcard endpoint as well.
	m, err := apiutil.NewDynamicRESTMapper(cfg, cl.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("REST mapper for %s: %w", wildcard, err)
	}
	d.mappers[wildcard] = m
	return m, nil
}

// sharedMapperCluster is an engaged workspace whose client and mapper use the shared
// mapper.
type sharedMapperCluster struct {
	ctrlcluster.Cluster
	client client.Client
	mapper meta.RESTMapper
}

func (c *sharedMapperCluster) GetClient() client.Client       { return c.client }
func (c *sharedMapperCluster) GetRESTMapper() meta.RESTMapper { return c.mapper }
