package cluster_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
)

// installInfo is a piece of a provider's CreateOrUpdate: it writes a ConfigMap into
// the tenant's namespace on the workload cluster, with what the runtime resolved.
func installInfo(ctx context.Context) error {
	id := cluster.IdentityFromCtx(ctx)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: id.TenantNamespace(), Name: "info"},
		Data:       map[string]string{"mode": string(cluster.ModeFromCtx(ctx)), "tenant": id.String()},
	}
	return cluster.WorkloadFromCtx(ctx).Create(ctx, cm)
}

// A provider's unit test hands its methods a context with the tenant it wants them to
// see: here a kcp workspace and a fake workload cluster.
func ExampleWithTenant() {
	workload := fake.NewClientBuilder().Build()
	ctx := cluster.WithTenant(context.Background(), &cluster.Tenant{
		Mode:     cluster.ModeKCP,
		Identity: cluster.KCPIdentity("2g2uv8c6mdmkelrp"),
		Workload: &cluster.Access{Client: workload},
	})
	if err := installInfo(ctx); err != nil {
		fmt.Println(err)
		return
	}
	list := &corev1.ConfigMapList{}
	if err := workload.List(ctx, list); err != nil {
		fmt.Println(err)
		return
	}
	for _, cm := range list.Items {
		fmt.Println(cm.Namespace, cm.Name, cm.Data["mode"], cm.Data["tenant"])
	}
	// Output: kcp--a86e1e43-e378-8e17-933d-22e50d203f90 info kcp 2g2uv8c6mdmkelrp
}

// Names derived from a tenant's identity are stable (they survive backup and
// restore, unlike UIDs) and distinct across tenants and modes: the tenant's namespace
// on the workload cluster, and names of the provider's own.
func ExampleIdentity_TenantNamespace() {
	kcp := cluster.KCPIdentity("2g2uv8c6mdmkelrp")
	standard := cluster.StandardIdentity("project-a", "demo")
	fmt.Println(kcp.TenantNamespace())
	fmt.Println(standard.TenantNamespace())
	fmt.Println(kcp.StableName("echo"))
	// Output:
	// kcp--a86e1e43-e378-8e17-933d-22e50d203f90
	// mcp--e1b6f7ec-a980-88cd-97b7-83fc567ed572
	// echo-a86e1e43-e378-8e17-933d-22e50d203f90
}

// A worker that takes a host, port and CA rather than a kubeconfig gets them from the
// end-user cluster's config. In kcp mode the URL's path names the workspace: hand the
// worker the whole URL, not only host and port.
func ExampleEndpointOf() {
	e, err := cluster.EndpointOf(&rest.Config{Host: "https://kcp.example.com:6443/clusters/2g2uv8c6mdmkelrp"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Host, e.Port, e.Path)
	// Output: kcp.example.com 6443 /clusters/2g2uv8c6mdmkelrp
}
