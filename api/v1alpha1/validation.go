package v1alpha1

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// workspacePath is the rule of the CRD's x-kubernetes-validations on providerWorkspace.
var workspacePath = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// Validate checks spec.kcp with the same rules the CRD schema enforces (markers on
// KCP and SecretReference), so that a ProviderConfig stored under an older or hand-made
// CRD is refused by the runtime with the same messages instead of failing later with a
// confusing kcp or Secret error. The rules must stay in step with the markers; the test
// in test/e2e-faults compares both on a real API server.
func (k *KCP) Validate() error {
	var errs []error
	ws := k.ProviderWorkspace
	switch {
	case ws == "":
		errs = append(errs, errors.New("spec.kcp.providerWorkspace is empty"))
	case len(ws) > 1024 || !workspacePath.MatchString(ws):
		errs = append(errs, errors.New("spec.kcp.providerWorkspace must be a kcp workspace path such as root:my-org:services: colon-separated names of lowercase letters, digits and '-', each starting and ending with a letter or digit"))
	default:
		for _, seg := range strings.Split(ws, ":") {
			if len(seg) > validation.DNS1123LabelMaxLength {
				errs = append(errs, fmt.Errorf("spec.kcp.providerWorkspace: each workspace name in the path must be at most %d characters", validation.DNS1123LabelMaxLength))
				break
			}
		}
	}
	s := k.KubeconfigSecret
	if s.Name == "" || s.Namespace == "" {
		errs = append(errs, errors.New("spec.kcp.kubeconfigSecret needs name and namespace"))
	}
	if s.Name != "" && len(validation.IsDNS1123Subdomain(s.Name)) > 0 {
		errs = append(errs, errors.New("spec.kcp.kubeconfigSecret.name must be a Secret name: lowercase letters, digits, '-' and '.'"))
	}
	if s.Namespace != "" && len(validation.IsDNS1123Label(s.Namespace)) > 0 {
		errs = append(errs, errors.New("spec.kcp.kubeconfigSecret.namespace must be a namespace name: lowercase letters, digits and '-', at most 63 characters"))
	}
	if s.Key != "" && len(validation.IsConfigMapKey(s.Key)) > 0 {
		errs = append(errs, errors.New("spec.kcp.kubeconfigSecret.key must be a Secret data key: letters, digits, '-', '_' and '.', not '.' and not starting with '..'"))
	}
	return errors.Join(errs...)
}
