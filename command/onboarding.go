package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	tok := &rotatingToken{platform: platform, request: client.ObjectKeyFromObject(ar), log: log}
	kubeconfig, err := tok.refresh(ctx)
	if err != nil {
		return nil, err
	}
	base, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("onboarding access %s: kubeconfig does not parse", tok.request)
	}
	if tok.current() == "" {
		// Not a token (a client certificate, say): nothing to rotate.
		return &platformAccess{Config: base, Request: tok.request}, nil
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+tok.current())
			return rt.RoundTrip(req)
		})
	})
	go tok.follow(ctx)
	return &platformAccess{Config: cfg, Request: tok.request}, nil
}

// releaseAccess deletes the AccessRequest and ClusterRequest requestOnboardingAccess
// created (init's, once the CRDs are installed: no standing CRD rights).
func releaseAccess(ctx context.Context, platform client.Client, provider, namespace, localName string) error {
	name := clusteraccess.StableRequestNameFromLocalName(provider, localName)
	for _, obj := range []client.Object{&clustersv1alpha1.AccessRequest{}, &clustersv1alpha1.ClusterRequest{}} {
		obj.SetNamespace(namespace)
		obj.SetName(name)
		if err := platform.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing %T %s/%s: %w", obj, namespace, name, err)
		}
	}
	return nil
}

// rotatingToken holds the current token of an AccessRequest's Secret.
type rotatingToken struct {
	platform client.Client
	request  client.ObjectKey
	log      logr.Logger

	mu    sync.RWMutex
	token string
}

func (t *rotatingToken) current() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.token
}

// refresh re-reads the request (its Secret may be renamed) and the Secret, and returns
// the kubeconfig.
func (t *rotatingToken) refresh(ctx context.Context) ([]byte, error) {
	ar := &clustersv1alpha1.AccessRequest{}
	if err := t.platform.Get(ctx, t.request, ar); err != nil {
		return nil, fmt.Errorf("reading AccessRequest %s: %w", t.request, err)
	}
	if ar.Status.SecretRef == nil {
		return nil, fmt.Errorf("AccessRequest %s has no Secret", t.request)
	}
	s := &corev1.Secret{}
	if err := t.platform.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, s); err != nil {
		return nil, fmt.Errorf("reading the access Secret of %s: %w", t.request, err)
	}
	if len(s.Data["kubeconfig"]) == 0 {
		return nil, fmt.Errorf("the access Secret of %s has no kubeconfig", t.request)
	}
	token := string(s.Data["token"])
	if token == "" {
		if kc, err := clientcmd.Load(s.Data["kubeconfig"]); err == nil {
			if kctx := kc.Contexts[kc.CurrentContext]; kctx != nil && kc.AuthInfos[kctx.AuthInfo] != nil {
				token = kc.AuthInfos[kctx.AuthInfo].Token
			}
		}
	}
	t.mu.Lock()
	t.token = token
	t.mu.Unlock()
	return s.Data["kubeconfig"], nil
}

// follow refreshes the token until ctx ends. A failed refresh keeps the old token: it
// usually still has most of its lifetime left.
func (t *rotatingToken) follow(ctx context.Context) {
	ticker := time.NewTicker(tokenRefreshInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if _, err := t.refresh(ctx); err != nil && ctx.Err() == nil {
			t.log.Error(err, "refreshing the onboarding access token; keeping the current one")
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
