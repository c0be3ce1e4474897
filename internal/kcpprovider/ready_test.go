package kcpprovider

import (
	"testing"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	conditionsv1alpha1 "github.com/kcp-dev/sdk/apis/third_party/conditions/apis/conditions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bindingWith is an APIBinding with the given conditions, bound as kcp reports it.
func bindingWith(conds ...conditionsv1alpha1.Condition) *apisv1alpha1.APIBinding {
	b := &apisv1alpha1.APIBinding{}
	b.Name = "widgets"
	b.Spec.Reference.Export = &apisv1alpha1.ExportBindingReference{Path: "root:providers", Name: "widgets"}
	b.Status.Phase = apisv1alpha1.APIBindingPhaseBound
	b.Status.Conditions = conds
	return b
}

func condition(t conditionsv1alpha1.ConditionType, s corev1.ConditionStatus) conditionsv1alpha1.Condition {
	return conditionsv1alpha1.Condition{Type: t, Status: s}
}

// TestIsReadyReadsTypedBindings: the typed check answers as the kcp provider's
// generic one does, on the typed binding and on its unstructured form.
func TestIsReadyReadsTypedBindings(t *testing.T) {
	for name, b := range map[string]*apisv1alpha1.APIBinding{
		"ready":           bindingWith(condition("APIExportValid", corev1.ConditionTrue), condition(conditionsv1alpha1.ReadyCondition, corev1.ConditionTrue)),
		"not ready":       bindingWith(condition(conditionsv1alpha1.ReadyCondition, corev1.ConditionFalse), condition("APIExportValid", corev1.ConditionTrue)),
		"ready unknown":   bindingWith(condition(conditionsv1alpha1.ReadyCondition, corev1.ConditionUnknown)),
		"other true only": bindingWith(condition("InitialBindingCompleted", corev1.ConditionTrue)),
		"no conditions":   bindingWith(),
	} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
		if err != nil {
			t.Fatal(err)
		}
		want := anyReady(b)
		for _, obj := range []client.Object{b, &unstructured.Unstructured{Object: u}} {
			if got := isReady(obj); got != want {
				t.Errorf("%s (%T): ready %v, want %v as the generic check says", name, obj, got, want)
			}
		}
		if want != (name == "ready") {
			t.Errorf("%s: the generic check says ready %v", name, want)
		}
	}
}

// BenchmarkIsReady is the readiness check of a bound workspace's APIBinding, asked
// for every engaged workspace on every ownership decision: typed, and the generic
// check it replaced.
func BenchmarkIsReady(b *testing.B) {
	binding := bindingWith(condition("APIExportValid", corev1.ConditionTrue), condition("InitialBindingCompleted", corev1.ConditionTrue),
		condition("PermissionClaimsApplied", corev1.ConditionTrue), condition(conditionsv1alpha1.ReadyCondition, corev1.ConditionTrue))
	for name, check := range map[string]func(client.Object) bool{"typed": isReady, "generic": anyReady} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !check(binding) {
					b.Fatal("not ready")
				}
			}
		})
	}
}
