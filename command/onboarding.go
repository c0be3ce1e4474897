package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/bearer"
)

// tokenRefreshInterval is how often a platform-granted access re-reads its Secret. The
// platform renews tokens at 80 % of their lifetime (hours), so a minute is plenty.
const tokenRefreshInterval = time.Minute

// platformAccess is access to a cluster granted by the platform: an AccessRequest in
// the provider's namespace whose Secret the platform keeps current.
type platformAccess struct {
	// Config reaches the cluster with the Secret's current token.
	Config *rest.Config
	// Request is the AccessRequest behind it.
	Request client.ObjectKey
}

// requestOnboardingAccess obtains the onboarding cluster the way openMCP providers
// do: a ClusterRequest with purpose onboarding and an AccessRequest with exactly perms,
// both named <provider>--<localName> in the provider's namespace. It returns once the
// access is granted (or fails when denied or after timeout). The returned config
// follows token renewals until ctx ends.
func requestOnboardingAccess(ctx context.Context, log logr.Logger, platform client.Client, provider, namespace, localName string,
	perms []clustersv1alpha1.PermissionsRequest, timeout time.Duration) (*platformAccess, error) {
	if namespace == "" {
		return nil, errors.New("the provider's namespace is unknown (--namespace or POD_NAMESPACE): it holds the onboarding access request")
	}
	mgr := clusteraccess.NewClusterAccessManager(platform, provider, namespace).
		WithInterval(time.Second).
		WithTimeout(timeout)
	log.Info("requesting onboarding cluster access from the platform", "request", namespace+"/"+clusteraccess.StableRequestNameFromLocalName(provider, localName))
	// The library's client for the cluster is not used: its token would expire.
	if _, err := mgr.CreateAndWaitForCluster(ctx, localName, clustersv1alpha1.PURPOSE_ONBOARDING, runtime.NewScheme(), perms); err != nil {
		return nil, fmt.Errorf("onboarding cluster access %s/%s: %w", namespace, clusteraccess.StableRequestNameFromLocalName(provider, localName), err)
	}
	ar, err := mgr.AccessRequest(ctx, localName)
	if err != nil {
		return nil, err
	}
	if !ar.Status.IsGranted() {
		return nil, fmt.Errorf("onboarding cluster access %s/%s is %s, not granted", ar.Namespace, ar.Name, ar.Status.Phase)
	}
	request := client.ObjectKeyFromObject(ar)
	// The platform renews the token in the Secret; the holder re-reads it every
	// tokenRefreshInterval. kubeconfig is the last read's, used once below, before
	// the renewals start.
	var kubeconfig []byte
	tok := bearer.New(func(ctx context.Context) (bearer.Token, error) {
		kc, token, err := readAccessSecret(ctx, platform, request)
		if err != nil {
			return bearer.Token{}, err
		}
		kubeconfig = kc
		return bearer.Token{Value: token}, nil
	}, bearer.Options{Poll: tokenRefreshInterval, Log: log.WithValues("token", "onboarding access "+request.String())})
	if err := tok.Refresh(ctx); err != nil {
		return nil, err
	}
	base, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("onboarding access %s: kubeconfig does not parse", request)
	}
	if tok.Current().Value == "" {
		// Not a token (a client certificate, say): nothing to rotate.
		return &platformAccess{Config: base, Request: request}, nil
	}
	go tok.Renew(ctx)
	return &platformAccess{Config: tok.Config(base), Request: request}, nil
}

// releaseAccess deletes the AccessRequest and ClusterRequest requestOnboardingAccess
// created (init's, once the CRDs are installed: no standing CRD rights), saying each
// deletion to out.
func releaseAccess(ctx context.Context, platform client.Client, provider, namespace, localName string, out io.Writer) error {
	name := clusteraccess.StableRequestNameFromLocalName(provider, localName)
	for _, obj := range []client.Object{&clustersv1alpha1.AccessRequest{}, &clustersv1alpha1.ClusterRequest{}} {
		if err := deleteIfPresent(ctx, platform, obj, namespace, name, out); err != nil {
			return fmt.Errorf("releasing: %w", err)
		}
	}
	return nil
}

// readAccessSecret reads the AccessRequest request (its Secret may be renamed) and its
// Secret, and returns the kubeconfig and the token in it ("" for another kind of
// credential).
func readAccessSecret(ctx context.Context, platform client.Client, request client.ObjectKey) ([]byte, string, error) {
	ar := &clustersv1alpha1.AccessRequest{}
	if err := platform.Get(ctx, request, ar); err != nil {
		return nil, "", fmt.Errorf("reading AccessRequest %s: %w", request, err)
	}
	if ar.Status.SecretRef == nil {
		return nil, "", fmt.Errorf("AccessRequest %s has no Secret", request)
	}
	s := &corev1.Secret{}
	if err := platform.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, s); err != nil {
		return nil, "", fmt.Errorf("reading the access Secret of %s: %w", request, err)
	}
	if len(s.Data["kubeconfig"]) == 0 {
		return nil, "", fmt.Errorf("the access Secret of %s has no kubeconfig", request)
	}
	token := string(s.Data["token"])
	if token == "" {
		if kc, err := clientcmd.Load(s.Data["kubeconfig"]); err == nil {
			if kctx := kc.Contexts[kc.CurrentContext]; kctx != nil && kc.AuthInfos[kctx.AuthInfo] != nil {
				token = kc.AuthInfos[kctx.AuthInfo].Token
			}
		}
	}
	return s.Data["kubeconfig"], token, nil
}
