package echo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Names of what the provider installs in a tenant's namespace on the workload cluster.
// They are fixed: the namespace is already per tenant.
const (
	WorkerName       = "echo-worker"
	KubeconfigSecret = "echo-worker-kubeconfig"
	// PullSecret is the copy of the ProviderConfig's spec.imagePullSecret.
	PullSecret = "echo-pull-secret"
	// InfoConfigMap is what the provider publishes to the tenant on the end-user
	// cluster, in namespace InfoNamespace, with its own credential: the worker's
	// version and message. The worker's credential cannot touch it.
	InfoConfigMap = "echo-info"
	InfoNamespace = "default"
	// KubeconfigKey is the Secret's data key, and the file name in the worker's mount.
	KubeconfigKey = "kubeconfig"
	// kubeconfigDir is where the worker finds its kubeconfig. The kubelet updates a
	// mounted Secret in place, so the worker picks up renewed tokens by re-reading the
	// file, without a restart.
	kubeconfigDir = "/etc/echo"
	// fieldOwner is the server-side apply manager of the provider's objects.
	fieldOwner = "echo-provider"
	// IdentityAnnotation on the worker says which tenant it serves, for operators of
	// the shared workload cluster (label values cannot hold every identity).
	IdentityAnnotation = "echo.services.open-control-plane.io/identity"
	// ConditionWorkerAvailable is the provider's own condition: whether the worker's
	// pods run. It is informational: Ready means "installed as asked", since the worker
	// only depends on the workload cluster's scheduling from there on.
	ConditionWorkerAvailable = "WorkerAvailable"
)

// Provider installs the echo worker: on the workload cluster, in the tenant's
// namespace, a Secret with the end-user kubeconfig (the tenant's ControlPlane or kcp
// workspace) and a Deployment of the worker version the Echo object asks for.
type Provider struct{}

var _ provider.Reconciler[*v1alpha1.Echo] = Provider{}

// CreateOrUpdate installs or updates the worker. Every call applies the whole desired
// state, so drift on the workload cluster is repaired on the next poll.
func (Provider) CreateOrUpdate(ctx context.Context, e *v1alpha1.Echo) (provider.Result, error) {
	config := cluster.ProviderConfigFromCtx[*v1alpha1.ProviderConfig](ctx)
	version, ok := config.Version(e.Spec.Version)
	if !ok {
		// Bad input: shown once, retried only when the Echo or the config changes.
		return provider.Result{}, provider.Terminal(fmt.Errorf("version %q is not offered; choose one of: %s", e.Spec.Version, strings.Join(config.VersionNames(), ", ")))
	}
	// The worker's own credential: only what WorkerMCPPermissions declares.
	kubeconfig := cluster.WorkerKubeconfigFromCtx(ctx)
	if len(kubeconfig) == 0 {
		return provider.Result{}, errors.New("no end-user kubeconfig to hand the worker")
	}
	wl := cluster.WorkloadFromCtx(ctx)
	id := cluster.IdentityFromCtx(ctx)
	ns := id.TenantNamespace()
	var installed []v1alpha1.InstalledResource
	note := func(clusterName, kind, namespace, name, phase, message string) {
		installed = append(installed, v1alpha1.InstalledResource{Cluster: clusterName, Kind: kind, Namespace: namespace, Name: name, Phase: phase, Message: message})
	}

	// The namespace is the tenant's on this shared cluster, possibly used by other
	// services too: create it when missing, never change or delete it.
	namespace := &corev1.Namespace{}
	switch err := wl.Get(ctx, client.ObjectKey{Name: ns}, namespace); {
	case apierrors.IsNotFound(err):
		namespace.Name = ns
		if err := wl.Create(ctx, namespace); err != nil && !apierrors.IsAlreadyExists(err) {
			return provider.Result{}, fmt.Errorf("creating namespace %s on the workload cluster: %w", ns, err)
		}
	case err != nil:
		return provider.Result{}, fmt.Errorf("reading namespace %s on the workload cluster: %w", ns, err)
	case namespace.DeletionTimestamp != nil:
		return provider.Pending(fmt.Sprintf("namespace %s on the workload cluster is still terminating", ns), 10*time.Second), nil
	}
	note("workload", "Namespace", "", ns, "Applied", "the tenant's namespace on the workload cluster, kept when the Echo goes")

	pullSecret, err := copyPullSecret(ctx, wl, config, ns, version.Name)
	if err != nil {
		return provider.Result{}, err
	}
	if pullSecret != "" {
		note("workload", "Secret", ns, PullSecret, "Copied", "from "+cluster.ProviderNamespaceFromCtx(ctx)+"/"+pullSecret+" on the platform cluster")
	}
	secret := corev1ac.Secret(KubeconfigSecret, ns).
		WithLabels(labels(version.Name)).
		WithAnnotations(map[string]string{IdentityAnnotation: id.String()}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{KubeconfigKey: kubeconfig})
	if err := wl.Apply(ctx, secret, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return provider.Result{}, fmt.Errorf("applying Secret %s/%s on the workload cluster: %w", ns, KubeconfigSecret, err)
	}
	note("workload", "Secret", ns, KubeconfigSecret, "Applied", "the worker's kubeconfig for the end-user cluster")
	deployment := WorkerDeployment(ns, id.String(), e, version)
	if pullSecret != "" {
		deployment.Spec.Template.Spec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(PullSecret))
	}
	if err := wl.Apply(ctx, deployment, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return provider.Result{}, fmt.Errorf("applying Deployment %s/%s on the workload cluster: %w", ns, WorkerName, err)
	}
	available := availability(e.Generation, deployment.Status)
	note("workload", "Deployment", ns, WorkerName, "Applied", available.Message)

	// With the provider's own credential (MCPPermissions), which the worker does not
	// hold.
	if err := publishInfo(ctx, cluster.MCPFromCtx(ctx), e, version.Name); err != nil {
		return provider.Result{}, err
	}
	note("end-user", "ConfigMap", InfoNamespace, InfoConfigMap, "Applied", "the worker's version and message, for the tenant")

	e.Status.Installed = installed
	meta.SetStatusCondition(&e.Status.Conditions, available)
	return provider.Done(), nil
}

// copyPullSecret copies the ProviderConfig's image pull secret from the provider's
// namespace on the platform cluster next to the worker; it returns the source's name,
// empty when the config names none.
func copyPullSecret(ctx context.Context, wl client.Client, config *v1alpha1.ProviderConfig, ns, version string) (string, error) {
	name := config.Spec.ImagePullSecret
	if name == "" {
		return "", nil
	}
	src := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cluster.ProviderNamespaceFromCtx(ctx), Name: name}
	if err := cluster.PlatformFromCtx(ctx).Get(ctx, key, src); err != nil {
		return "", fmt.Errorf("reading the image pull secret %s on the platform cluster: %w", key, err)
	}
	copied := corev1ac.Secret(PullSecret, ns).WithLabels(labels(version)).WithType(src.Type).WithData(src.Data)
	if err := wl.Apply(ctx, copied, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("applying Secret %s/%s on the workload cluster: %w", ns, PullSecret, err)
	}
	return name, nil
}

// publishInfo writes the InfoConfigMap on the end-user cluster.
func publishInfo(ctx context.Context, endUser client.Client, e *v1alpha1.Echo, version string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: InfoNamespace, Name: InfoConfigMap}}
	data := map[string]string{"version": version, "message": e.Spec.Message, "echo": e.Namespace + "/" + e.Name}
	switch err := endUser.Get(ctx, client.ObjectKeyFromObject(cm), cm); {
	case apierrors.IsNotFound(err):
		cm.Data = data
		if err := endUser.Create(ctx, cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s on the end-user cluster: %w", InfoNamespace, InfoConfigMap, err)
		}
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s on the end-user cluster: %w", InfoNamespace, InfoConfigMap, err)
	case !maps.Equal(cm.Data, data):
		cm.Data = data
		if err := endUser.Update(ctx, cm); err != nil {
			return fmt.Errorf("updating ConfigMap %s/%s on the end-user cluster: %w", InfoNamespace, InfoConfigMap, err)
		}
	}
	return nil
}

// Delete removes the worker, its Secrets and the tenant's info ConfigMap. The tenant
// namespace stays (see CreateOrUpdate). It reports InProgress until the worker's
// objects are gone, so the runtime revokes the worker's access only once nothing can
// use it any more.
func (Provider) Delete(ctx context.Context, e *v1alpha1.Echo) (provider.Result, error) {
	deletion := cluster.DeletionFromCtx(ctx)
	// The end-user cluster is Gone when the orphan sweep calls (the workspace or
	// ControlPlane went first, the ConfigMap with it) and NotGranted when echo never
	// reached it: either way there is nothing to remove there.
	if deletion.EndUser == cluster.Reachable {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: InfoNamespace, Name: InfoConfigMap}}
		if err := cluster.MCPFromCtx(ctx).Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return provider.Result{}, fmt.Errorf("deleting ConfigMap %s/%s on the end-user cluster: %w", InfoNamespace, InfoConfigMap, err)
		}
	}
	// Everything else echo installs is on the workload cluster; without access to it
	// (never granted, or released already) there is nothing it can remove.
	if deletion.Workload != cluster.Reachable {
		return provider.Done(), nil
	}
	wl := cluster.WorkloadFromCtx(ctx)
	ns := cluster.IdentityFromCtx(ctx).TenantNamespace()
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: WorkerName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: KubeconfigSecret}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PullSecret}},
	}
	var remaining []string
	for _, o := range objs {
		err := wl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return provider.Result{}, fmt.Errorf("deleting %T %s/%s on the workload cluster: %w", o, ns, o.GetName(), err)
		}
		if err := wl.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil {
			remaining = append(remaining, o.GetName())
		} else if !apierrors.IsNotFound(err) {
			return provider.Result{}, fmt.Errorf("checking %s/%s on the workload cluster: %w", ns, o.GetName(), err)
		}
	}
	if len(remaining) > 0 {
		return provider.Pending("waiting for "+strings.Join(remaining, ", ")+" to be removed", 2*time.Second), nil
	}
	return provider.Done(), nil
}

// labels of every object the provider installs; the selector uses only the stable ones.
func labels(version string) map[string]string {
	l := selector()
	l["app.kubernetes.io/version"] = version
	l["app.kubernetes.io/managed-by"] = fieldOwner
	return l
}

func selector() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     WorkerName,
		"app.kubernetes.io/instance": "echo",
	}
}

// WorkerDeployment is the desired worker Deployment of e at version in namespace ns.
// Its arguments carry everything the worker needs, so it runs the same against a
// ControlPlane and a kcp workspace; the mounted kubeconfig reaches the end-user
// cluster, and the worker gets no credentials for the workload cluster it runs on.
func WorkerDeployment(ns, identity string, e *v1alpha1.Echo, version v1alpha1.WorkerVersion) *appsv1ac.DeploymentApplyConfiguration {
	replicas := int32(1)
	if version.Replicas != nil {
		replicas = *version.Replicas
	}
	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("KUBECONFIG").WithValue(kubeconfigDir + "/" + KubeconfigKey),
	}
	for _, v := range version.Env {
		env = append(env, corev1ac.EnvVar().WithName(v.Name).WithValue(v.Value))
	}
	container := corev1ac.Container().
		WithName("worker").
		WithImage(version.Image).
		WithArgs(
			"--listen-address=:8080",
			"--message="+e.Spec.Message,
			// Where the tenant's Echo lives in the end-user cluster: a worker that can
			// read it there (kcp mode) follows spec.message without a redeploy.
			"--echo-namespace="+e.Namespace,
			"--echo-name="+e.Name,
		).
		WithEnv(env...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("kubeconfig").WithMountPath(kubeconfigDir).WithReadOnly(true)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")})).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	pod := corev1ac.PodSpec().
		WithContainers(container).
		// The worker must reach the tenant only: no token for the workload cluster.
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithVolumes(corev1ac.Volume().WithName("kubeconfig").
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(KubeconfigSecret)))
	return appsv1ac.Deployment(WorkerName, ns).
		WithLabels(labels(version.Name)).
		WithAnnotations(map[string]string{IdentityAnnotation: identity}).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector())).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels(version.Name)).
				WithSpec(pod)))
}

// availability turns the worker Deployment's status into the WorkerAvailable condition.
func availability(generation int64, st *appsv1ac.DeploymentStatusApplyConfiguration) metav1.Condition {
	c := metav1.Condition{Type: ConditionWorkerAvailable, ObservedGeneration: generation}
	var available, wanted int32
	if st != nil {
		if st.AvailableReplicas != nil {
			available = *st.AvailableReplicas
		}
		if st.Replicas != nil {
			wanted = *st.Replicas
		}
	}
	switch {
	case available > 0:
		c.Status, c.Reason = metav1.ConditionTrue, "Available"
		c.Message = fmt.Sprintf("%d of %d worker replicas available", available, wanted)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, "Unavailable"
		c.Message = "no worker replica is available yet on the workload cluster"
	}
	return c
}
