package echo_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"

	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
)

// The worker Deployment is the provider's contract with the workload cluster: what a
// tenant asked for must end up in it, and nothing that widens the worker's reach.
func TestWorkerDeployment(t *testing.T) {
	e := &v1alpha1.Echo{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
		Spec:       v1alpha1.EchoSpec{Version: "v2", Message: "hello there"},
	}
	version := v1alpha1.WorkerVersion{Name: "v2", Image: "example.org/echo:v2", Replicas: ptr.To[int32](2),
		Env: []v1alpha1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}}
	ac := echo.WorkerDeployment("kcp--abc", "2x7c3tenant", e, version)

	// Round-trip through JSON into the typed object, as the API server would see it.
	raw, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(raw, d); err != nil {
		t.Fatal(err)
	}
	if d.Namespace != "kcp--abc" || d.Name != echo.WorkerName {
		t.Errorf("deployment %s/%s", d.Namespace, d.Name)
	}
	if got := d.Annotations[echo.IdentityAnnotation]; got != "2x7c3tenant" {
		t.Errorf("identity annotation %q", got)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	if _, ok := d.Spec.Selector.MatchLabels["app.kubernetes.io/version"]; ok {
		t.Error("the selector holds the version: an upgrade would need a new Deployment (selectors are immutable)")
	}
	pod := d.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the worker would get a token for the workload cluster")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "example.org/echo:v2" {
		t.Errorf("image %q", c.Image)
	}
	for _, want := range []string{"--message=hello there", "--echo-namespace=default", "--echo-name=demo"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	env := map[string]string{}
	for _, v := range c.Env {
		env[v.Name] = v.Value
	}
	if env["LOG_LEVEL"] != "debug" || !strings.HasSuffix(env["KUBECONFIG"], "/"+echo.KubeconfigKey) {
		t.Errorf("env %v", env)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != echo.KubeconfigSecret {
		t.Errorf("volumes %+v", pod.Volumes)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("security context %+v", sc)
	}
}

func TestProviderConfigVersions(t *testing.T) {
	pc := &v1alpha1.ProviderConfig{Spec: v1alpha1.ProviderConfigSpec{Versions: []v1alpha1.WorkerVersion{
		{Name: "v1", Image: "i:1"}, {Name: "v2", Image: "i:2"},
	}}}
	if err := pc.Validate(); err != nil {
		t.Fatal(err)
	}
	if v, ok := pc.Version(""); !ok || v.Name != "v1" {
		t.Errorf("default version %+v %v, want the first", v, ok)
	}
	if v, ok := pc.Version("v2"); !ok || v.Image != "i:2" {
		t.Errorf("v2 %+v %v", v, ok)
	}
	if _, ok := pc.Version("v3"); ok {
		t.Error("an unlisted version was found")
	}
	pc.Spec.Versions = append(pc.Spec.Versions, v1alpha1.WorkerVersion{Name: "v1", Image: ""})
	if err := pc.Validate(); err == nil || !strings.Contains(err.Error(), "twice") || !strings.Contains(err.Error(), "image") {
		t.Errorf("Validate: %v", err)
	}
	pc.Spec.Versions = nil
	if err := pc.Validate(); err == nil {
		t.Error("an empty version list passed")
	}
}

// The provider's contract with the runtime, on fake clusters: the worker gets the
// worker's kubeconfig and a copy of the pull secret the ProviderConfig names, the
// provider's own credential writes echo-info, the Echo's own status lists what was
// installed, an unknown version is terminal, and Delete removes only what it can reach.
func TestProviderCreateOrUpdateAndDelete(t *testing.T) {
	scheme, err := echo.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "echo-system", Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	platform := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pull).Build()
	wl := fake.NewClientBuilder().WithScheme(scheme).Build()
	endUser := fake.NewClientBuilder().WithScheme(scheme).Build()
	config := &v1alpha1.ProviderConfig{Spec: v1alpha1.ProviderConfigSpec{ImagePullSecret: "registry",
		Versions: []v1alpha1.WorkerVersion{{Name: "v1", Image: "example.org/echo:v1"}}}}
	id := cluster.KCPIdentity("2x7c3tenant")
	tenant := &cluster.Tenant{Mode: cluster.ModeKCP, Identity: id, ProviderConfig: config, Platform: platform, ProviderNamespace: "echo-system",
		MCP:      &cluster.Access{Client: endUser, Kubeconfig: []byte("provider")},
		Worker:   &cluster.Access{Kubeconfig: []byte("worker")},
		Workload: &cluster.Access{Client: wl}}
	ctx := cluster.WithTenant(context.Background(), tenant)
	e := &v1alpha1.Echo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}, Spec: v1alpha1.EchoSpec{Message: "hi"}}

	if _, err := (echo.Provider{}).CreateOrUpdate(ctx, e); err != nil {
		t.Fatal(err)
	}
	ns := id.TenantNamespace()
	kc, copied := &corev1.Secret{}, &corev1.Secret{}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.KubeconfigSecret}, kc); err != nil || string(kc.Data[echo.KubeconfigKey]) != "worker" {
		t.Errorf("worker kubeconfig %q (%v), want the worker's credential", kc.Data[echo.KubeconfigKey], err)
	}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.PullSecret}, copied); err != nil || copied.Type != pull.Type || string(copied.Data[corev1.DockerConfigJsonKey]) != `{"auths":{}}` {
		t.Errorf("pull secret copy %+v (%v)", copied, err)
	}
	d := &appsv1.Deployment{}
	if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.WorkerName}, d); err != nil || len(d.Spec.Template.Spec.ImagePullSecrets) != 1 {
		t.Errorf("worker pulls with %+v (%v), want the copy", d.Spec.Template.Spec.ImagePullSecrets, err)
	}
	info := &corev1.ConfigMap{}
	if err := endUser.Get(ctx, client.ObjectKey{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}, info); err != nil || info.Data["version"] != "v1" {
		t.Errorf("echo-info %+v (%v)", info.Data, err)
	}
	var phases []string
	for _, r := range e.Status.Installed {
		phases = append(phases, r.Kind+"/"+r.Name+"="+r.Phase)
	}
	want := []string{"Namespace/" + ns + "=Applied", "Secret/" + echo.PullSecret + "=Copied", "Secret/" + echo.KubeconfigSecret + "=Applied",
		"Deployment/" + echo.WorkerName + "=Applied", "ConfigMap/" + echo.InfoConfigMap + "=Applied"}
	if !slices.Equal(phases, want) {
		t.Errorf("installed %v, want %v", phases, want)
	}

	e.Spec.Version = "v9"
	if _, err := (echo.Provider{}).CreateOrUpdate(ctx, e); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("unknown version: %v, want a terminal error", err)
	}

	// The orphan sweep's Delete: the end-user cluster is gone, the workload cluster
	// reachable.
	tenant.MCP, tenant.Deletion = nil, &cluster.Deletion{Orphaned: true, EndUser: cluster.Gone, Workload: cluster.Reachable}
	if res, err := (echo.Provider{}).Delete(ctx, e); err != nil || res.InProgress {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	for _, name := range []string{echo.KubeconfigSecret, echo.PullSecret} {
		if err := wl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("secret %s after delete: %v", name, err)
		}
	}
}
