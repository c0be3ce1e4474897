package tokens

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrClaimNotAccepted matches every [*ClaimNotAcceptedError] with errors.Is.
var ErrClaimNotAccepted = errors.New("permission claim not accepted")

// ClaimNotAcceptedError says that the tenant's APIBinding does not accept a permission
// claim the runtime needs, so the virtual workspace refused the runtime's request. It is
// the tenant's move (accept the claim) or the provider's (claim it in the export); the
// engine shows it on the tenant's object.
type ClaimNotAcceptedError struct {
	// Resource is the claimed resource, e.g. serviceaccounts or
	// clusterroles.rbac.authorization.k8s.io.
	Resource schema.GroupResource
	// Verb is the refused verb.
	Verb string
	// Cause is the virtual workspace's answer.
	Cause error
}

// Error names the claim in the words of an APIBinding.
func (e *ClaimNotAcceptedError) Error() string {
	return fmt.Sprintf("permission claim %q (verb %s) is not accepted by the tenant's APIBinding: %v", e.Resource.String(), e.Verb, e.Cause)
}

// Is makes errors.Is(err, ErrClaimNotAccepted) true.
func (e *ClaimNotAcceptedError) Is(target error) bool { return target == ErrClaimNotAccepted }

// Unwrap returns the virtual workspace's answer.
func (e *ClaimNotAcceptedError) Unwrap() error { return e.Cause }

// apiBindingListGVK is read as unstructured so that the caller's client needs no kcp
// types in its scheme.
var apiBindingListGVK = apisv1alpha2.SchemeGroupVersion.WithKind("APIBindingList")

// classify turns a refusal of a claimed resource by the virtual workspace into a
// *ClaimNotAcceptedError when the claim is the reason, and returns err unchanged
// otherwise.
//
// A claim that is not accepted gives 403 Forbidden, which has other causes too, so
// before blaming the tenant the binding itself is read (the virtual workspace serves
// it read-only). A resource the export does not claim at all is not served (no kind
// match or a bare 404). Measured facts: docs/design/tenant-credentials.md.
func classify(ctx context.Context, ws client.Client, gr schema.GroupResource, verb string, err error) error {
	if err == nil {
		return nil
	}
	if meta.IsNoMatchError(err) || isResourceNotServed(err) {
		return &ClaimNotAcceptedError{Resource: gr, Verb: verb, Cause: err}
	}
	if !apierrors.IsForbidden(err) {
		return err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(apiBindingListGVK)
	if lerr := ws.List(ctx, list); lerr != nil {
		// Cannot tell; report the refusal as it is.
		return err
	}
	for _, item := range list.Items {
		if claimAccepts(item, gr, verb) {
			return err // the claim is fine: the refusal has another cause
		}
	}
	return &ClaimNotAcceptedError{Resource: gr, Verb: verb, Cause: err}
}

// isResourceNotServed recognises the 404 of a resource the server does not serve, as
// opposed to the 404 of an object that does not exist (which names the object).
func isResourceNotServed(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// claimAccepts says whether an APIBinding accepts gr for verb.
func claimAccepts(binding unstructured.Unstructured, gr schema.GroupResource, verb string) bool {
	claims, _, _ := unstructured.NestedSlice(binding.Object, "spec", "permissionClaims")
	for _, raw := range claims {
		c, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		group, _, _ := unstructured.NestedString(c, "group")
		resource, _, _ := unstructured.NestedString(c, "resource")
		state, _, _ := unstructured.NestedString(c, "state")
		verbs, _, _ := unstructured.NestedStringSlice(c, "verbs")
		if group == gr.Group && resource == gr.Resource && state == string(apisv1alpha2.ClaimAccepted) &&
			(slices.Contains(verbs, verb) || slices.Contains(verbs, "*")) {
			return true
		}
	}
	return false
}

// NotManagedError says that an object the Minter needs exists in the tenant workspace
// under its name but without the Minter's labels, so the claims (narrowed to those
// labels) hide it from the runtime: the runtime can neither read, repair nor replace
// it. Someone in the workspace created it, or removed the labels from the runtime's
// own; only they can resolve it.
type NotManagedError struct {
	// Resource is the object's resource, e.g. serviceaccounts.
	Resource schema.GroupResource
	// Name is the object's name (namespace/name when namespaced).
	Name string
	// Labels are the labels the runtime puts on what it manages.
	Labels map[string]string
}

// Error says what to do about it.
func (e *NotManagedError) Error() string {
	return fmt.Sprintf("%s %s exists in this workspace without the label %s, so the runtime can neither see nor manage it: delete it (the runtime then creates its own), or label it %s to hand it to the runtime",
		e.Resource.String(), e.Name, formatLabels(e.Labels), formatLabels(e.Labels))
}

// MissingError says that something the provider's declared permissions refer to does
// not exist in the tenant workspace: a ClusterRole or Role it binds its credential to
// (a RoleRef), or the namespace its rules or Role are for. A workspace holds only what
// kcp puts there and what its owner creates, and the runtime creates no role or
// namespace for the tenant: the tenant creates it, or the provider declares otherwise.
type MissingError struct {
	// Kind is ClusterRole, Role or Namespace.
	Kind string
	// Namespace is the Role's namespace; empty for the others.
	Namespace string
	// Name is the missing object's name.
	Name string
}

// Error names what is missing and what to do about it.
func (e *MissingError) Error() string {
	if e.Kind == "Namespace" {
		return fmt.Sprintf("the provider's permissions are for the namespace %s, which does not exist in this workspace: create it, or ask the provider to declare other permissions", e.Name)
	}
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + e.Name
	}
	return fmt.Sprintf("the provider binds its credential to the %s %s, which does not exist in this workspace: create it, or ask the provider to declare rules instead", e.Kind, name)
}
