// Package e2e tests the echo provider end to end in both modes with the public test
// kit: the way a provider author tests a provider of their own.
package e2e

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rtv1alpha1 "github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestEchoBothModes serves one kcp workspace and one ControlPlane and checks what a
// tenant and a platform team would: the worker installed with the pull secret the
// ProviderConfig names, echo's own status, the worker's narrower credential, an
// unknown version rejected once, and nothing left after deletion.
func TestEchoBothModes(t *testing.T) {
	scheme, err := echo.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	config := &v1alpha1.ProviderConfig{Spec: v1alpha1.ProviderConfigSpec{ImagePullSecret: "registry",
		Versions: []v1alpha1.WorkerVersion{{Name: "v1.0.0", Image: "example.org/echo-worker:v1.0.0"}}}}
	env := testkit.Start(t, testkit.Options{Provider: echo.Description(), Scheme: scheme, ProviderConfig: config})
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: env.ProviderNamespace, Name: "registry"},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if err := env.Platform.Create(t.Context(), pull); err != nil {
		t.Fatal(err)
	}

	for _, tn := range env.Tenants(t, "demo") {
		t.Run(string(tn.Mode), func(t *testing.T) {
			ctx, ns := t.Context(), tn.Identity.TenantNamespace()
			e := &v1alpha1.Echo{ObjectMeta: tn.ObjectMeta(), Spec: v1alpha1.EchoSpec{Message: "hello"}}
			tn.Create(t, e)
			tn.WaitReady(t, e)

			worker, copied := &appsv1.Deployment{}, &corev1.Secret{}
			if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.WorkerName}, worker); err != nil {
				t.Fatalf("the worker on the workload cluster: %v", err)
			}
			if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.PullSecret}, copied); err != nil || string(copied.Data[corev1.DockerConfigJsonKey]) != `{"auths":{}}` {
				t.Fatalf("the pull secret copied next to the worker: %v %q", err, copied.Data)
			}
			if len(e.Status.Installed) != 5 {
				t.Errorf("status.installed lists %d objects, want namespace, pull secret, kubeconfig, worker, info: %+v", len(e.Status.Installed), e.Status.Installed)
			}
			info := &corev1.ConfigMap{}
			if err := tn.EndUser.Get(ctx, client.ObjectKey{Namespace: echo.InfoNamespace, Name: echo.InfoConfigMap}, info); err != nil {
				t.Fatalf("%s on the end-user cluster: %v", echo.InfoConfigMap, err)
			}
			// The provider's own rights, declared for InfoNamespace, are a Role there in
			// both modes, never cluster-wide.
			declared := echo.MCPPermissions().Rules[0].Rules
			roles, clusterRoles := &rbacv1.RoleList{}, &rbacv1.ClusterRoleList{}
			if err := tn.EndUser.List(ctx, roles, client.InNamespace(echo.InfoNamespace)); err != nil {
				t.Fatal(err)
			}
			if err := tn.EndUser.List(ctx, clusterRoles); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(roles.Items, func(r rbacv1.Role) bool { return equality.Semantic.DeepEqual(r.Rules, declared) }) {
				t.Errorf("no Role in namespace %s holds the provider's rules %+v", echo.InfoNamespace, declared)
			}
			if i := slices.IndexFunc(clusterRoles.Items, func(r rbacv1.ClusterRole) bool { return equality.Semantic.DeepEqual(r.Rules, declared) }); i >= 0 {
				t.Errorf("ClusterRole %s grants the rules declared for namespace %s cluster-wide", clusterRoles.Items[i].Name, echo.InfoNamespace)
			}
			// The worker's kubeconfig holds the worker's credential: it reads Echo
			// objects, and may not touch what the provider publishes with its own.
			kubeconfig := &corev1.Secret{}
			if err := env.Workload.Get(ctx, client.ObjectKey{Namespace: ns, Name: echo.KubeconfigSecret}, kubeconfig); err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig.Data[echo.KubeconfigKey])
			if err != nil {
				t.Fatal(err)
			}
			asWorker, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			if err := asWorker.Delete(ctx, info); !apierrors.IsForbidden(err) {
				t.Errorf("the worker deleting %s: %v, want forbidden", echo.InfoConfigMap, err)
			}

			// An unknown version is the tenant's mistake: shown once, not retried.
			e.Spec.Version = "v9"
			if err := tn.Client.Update(ctx, e); err != nil {
				t.Fatal(err)
			}
			tn.WaitCondition(t, e, rtv1alpha1.ConditionReady, metav1.ConditionFalse, rtv1alpha1.ReasonProviderRejected)

			tn.DeleteAndExpectNoLeftovers(t, e)
			if err := env.Workload.Get(ctx, client.ObjectKeyFromObject(worker), worker); !apierrors.IsNotFound(err) {
				t.Errorf("the worker after deletion: %v, want not found", err)
			}
		})
	}
}
