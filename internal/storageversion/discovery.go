package storageversion

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// WaitDiscoverable waits until the API server's discovery lists crd's group with every
// served version, and crd's resource in each of them. Established says the CRD's
// handlers run; discovery follows asynchronously, the group list (which REST mappers
// read first) and each version's resource list on their own. A client asking in
// between is told the kind does not exist, so the Service API is usable only after.
func WaitDiscoverable(ctx context.Context, cfg *rest.Config, crd *apiextensionsv1.CustomResourceDefinition, interval time.Duration) error {
	dc, err := clientdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	var why string
	err = wait.PollUntilContextTimeout(ctx, interval, 2*time.Minute, true, func(context.Context) (bool, error) {
		groups, err := dc.ServerGroups()
		if err != nil {
			why = err.Error()
			return false, nil
		}
		i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == crd.Spec.Group })
		for _, v := range served {
			if i < 0 || !slices.ContainsFunc(groups.Groups[i].Versions, func(gv metav1.GroupVersionForDiscovery) bool { return gv.Version == v }) {
				why = fmt.Sprintf("%s/%s not in the API group list yet", crd.Spec.Group, v)
				return false, nil
			}
			if _, why = discovered(dc, crd.Spec.Group+"/"+v, crd.Spec.Names.Plural); why != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until CRD %s is discoverable (%s): %w", crd.Name, why, err)
	}
	return nil
}

// discovered returns the resource named plural as the discovery of the group version
// gv lists it, or why it does not.
func discovered(dc clientdiscovery.DiscoveryInterface, gv, plural string) (*metav1.APIResource, string) {
	list, err := dc.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return nil, err.Error()
	}
	for i := range list.APIResources {
		if list.APIResources[i].Name == plural {
			return &list.APIResources[i], ""
		}
	}
	return nil, fmt.Sprintf("%s not in the discovery of %s yet", plural, gv)
}
