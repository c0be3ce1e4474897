package command

import (
	"context"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	providerv1alpha1 "github.com/openmcp-project/openmcp-operator/api/provider/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestRegisterGVKPrunes: after init, status.resources names exactly what the provider
// serves of its own groups, keeps other groups' kinds, and survives a conflicting
// write by the operator.
func TestRegisterGVKPrunes(t *testing.T) {
	const group = "echo.services.open-control-plane.io"
	v1 := metav1.GroupVersionKind{Group: group, Version: "v1", Kind: "Echo"}
	old := metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Echo"}
	gone := metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Shout"}
	foreign := metav1.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Thing"}
	for _, tc := range []struct {
		name       string
		have, want []metav1.GroupVersionKind
	}{
		{"empty", nil, []metav1.GroupVersionKind{v1}},
		{"registered", []metav1.GroupVersionKind{v1}, []metav1.GroupVersionKind{v1}},
		{"older version and a kind no longer served", []metav1.GroupVersionKind{old, gone}, []metav1.GroupVersionKind{v1}},
		{"other groups stay", []metav1.GroupVersionKind{foreign, old, v1, v1}, []metav1.GroupVersionKind{foreign, v1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme, err := PlatformScheme()
			if err != nil {
				t.Fatal(err)
			}
			sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "echo"}}
			sp.Status.Resources = tc.have
			sp.Status.Phase = "Ready"
			conflicts := 1
			c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(sp).WithObjects(sp).
				WithInterceptorFuncs(interceptor.Funcs{
					// The operator writes its status between init's read and write once.
					SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
						if conflicts > 0 {
							conflicts--
							cur := &providerv1alpha1.ServiceProvider{}
							if err := c.Get(ctx, client.ObjectKey{Name: "echo"}, cur); err != nil {
								return err
							}
							cur.Status.Phase = "Progressing"
							if err := c.Status().Update(ctx, cur); err != nil {
								return err
							}
						}
						return c.SubResource(sub).Update(ctx, obj, opts...)
					},
				}).Build()
			if err := registerGVK(t.Context(), logr.Discard(), c, "echo", v1, []string{group}); err != nil {
				t.Fatal(err)
			}
			got := &providerv1alpha1.ServiceProvider{}
			if err := c.Get(t.Context(), client.ObjectKey{Name: "echo"}, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Status.Resources, tc.want) {
				t.Errorf("status.resources = %v, want %v", got.Status.Resources, tc.want)
			}
			if conflicts == 0 && got.Status.Phase != "Progressing" {
				t.Errorf("the operator's status write was lost: phase %q", got.Status.Phase)
			}
		})
	}
}
