package localplatform

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
)

// RegisterControlPlane creates on the platform cluster what openMCP creates for the
// ControlPlane name/namespace: the namespace utils.StableMCPNamespace(name, namespace)
// and in it a ClusterRequest named name with purpose "mcp", granted with a Cluster
// object (named like the request, in that namespace) for the target targetName. The
// target must have been added with purpose "mcp". Policies are not asked: the platform
// itself created the request. It works whether or not the platform runs and returns
// once the request is granted. With Options.ClusterProviderOnly the openmcp-operator's
// scheduler grants it, creating the Cluster its purpose mapping for "mcp" describes;
// its profile must be the one of targetName's pool (ClusterProfileName), whose target
// targetName the platform then assigns to the Cluster (see TargetAnnotation).
func (p *Platform) RegisterControlPlane(ctx context.Context, name, namespace, targetName string) error {
	t := p.target(targetName)
	if t == nil {
		return fmt.Errorf("localplatform: unknown target %q", targetName)
	}
	if !slices.Contains(t.Purposes, clustersv1alpha1.PURPOSE_MCP) {
		return fmt.Errorf("localplatform: target %q does not serve purpose %q", targetName, clustersv1alpha1.PURPOSE_MCP)
	}
	ns, err := libutils.StableMCPNamespace(name, namespace)
	if err != nil {
		return fmt.Errorf("localplatform: namespace for ControlPlane %s/%s: %w", namespace, name, err)
	}
	if err := ensureNamespace(ctx, p.c, ns); err != nil {
		return fmt.Errorf("localplatform: on the platform cluster: %w", err)
	}

	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = name, ns
	cr.Annotations = map[string]string{TargetAnnotation: targetName}
	if !p.opts.ClusterProviderOnly {
		// Set right away: a running platform reconciles the new request concurrently.
		cr.Finalizers = []string{clustersv1alpha1.ClusterRequestFinalizer}
	}
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_MCP
	if err := p.c.Create(ctx, cr); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("localplatform: creating ClusterRequest %s/%s: %w", ns, name, err)
		}
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return fmt.Errorf("localplatform: getting ClusterRequest %s/%s: %w", ns, name, err)
		}
		if got := cr.Annotations[TargetAnnotation]; got != targetName || cr.Spec.Purpose != clustersv1alpha1.PURPOSE_MCP {
			return fmt.Errorf("localplatform: ClusterRequest %s/%s already exists for purpose %q and target %q", ns, name, cr.Spec.Purpose, got)
		}
	}
	// A running platform reconciles the new request at the same time, and many
	// registrations at once contend for the shared Cluster object: read the request
	// again and retry until it is granted (by either), rather than failing on a
	// conflict or on the controller's intermediate Pending.
	// The real scheduler grants requests one after the other at its own client limits,
	// so many ControlPlanes registered at once need far longer (docs/design/measured.md).
	timeout := 30 * time.Second
	if p.opts.ClusterProviderOnly {
		timeout = 5 * time.Minute
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, fmt.Errorf("localplatform: getting ClusterRequest %s/%s: %w", ns, name, err)
		}
		if cr.Status.IsGranted() {
			return true, nil
		}
		if p.opts.ClusterProviderOnly {
			// The openmcp-operator's scheduler grants it.
			last = fmt.Errorf("phase %q", cr.Status.Phase)
			return false, nil
		}
		if _, last = p.ensureClusterRequest(ctx, cr, false); last != nil {
			if apierrors.IsConflict(last) {
				return false, nil
			}
			return false, last
		}
		return cr.Status.IsGranted(), nil
	})
	if err != nil {
		return fmt.Errorf("localplatform: ClusterRequest %s/%s is %s, not granted: %w (last: %w)", ns, name, cr.Status.Phase, err, last)
	}
	return nil
}

// DeregisterControlPlane deletes the ClusterRequest RegisterControlPlane created; the
// running platform then releases its Cluster object. The namespace is left alone, as
// openMCP leaves it to the ControlPlane's deletion.
func (p *Platform) DeregisterControlPlane(ctx context.Context, name, namespace string) error {
	ns, err := libutils.StableMCPNamespace(name, namespace)
	if err != nil {
		return fmt.Errorf("localplatform: namespace for ControlPlane %s/%s: %w", namespace, name, err)
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = name, ns
	if err := p.c.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("localplatform: deleting ClusterRequest %s/%s: %w", ns, name, err)
	}
	return nil
}
