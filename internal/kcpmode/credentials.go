package kcpmode

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/internal/bearer"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// directTokenTTL is the lifetime of the runtime's own direct-call token; it is renewed
// at 80 %.
const directTokenTTL = time.Hour

// splitCredentials returns the credentials for virtual-workspace calls and for direct
// calls (TokenRequests in tenant workspaces). They must differ, or a kcp token-cache
// bug lends direct calls the virtual workspace's warrant
// (docs/design/tenant-credentials.md).
//
// When the kubeconfig is a ServiceAccount of the provider workspace (the production
// shape), the virtual workspace keeps it and direct calls get a second token of the
// same ServiceAccount, minted here and renewed until ctx ends. Any other identity (a
// user certificate, as in a development kcp) is used for both: it cannot mint a
// second credential of itself, and is reported in the log.
func splitCredentials(ctx context.Context, base *rest.Config, workspace, provider string) (vw, direct *rest.Config, id tokens.Identity, err error) {
	id, err = tokens.DetectIdentity(ctx, clusterConfig(base, workspace))
	if err != nil {
		return nil, nil, id, err
	}
	if !id.IsServiceAccount {
		log.FromContext(ctx).Info("kcp identity is not a ServiceAccount; using one credential for virtual workspace and direct calls", "user", id.Username)
		return base, rest.CopyConfig(base), id, nil
	}
	parts := strings.Split(strings.TrimPrefix(id.Username, "system:serviceaccount:"), ":")
	if len(parts) != 2 {
		return nil, nil, id, fmt.Errorf("unexpected ServiceAccount username %q", id.Username)
	}
	cs, err := kubernetes.NewForConfig(clusterConfig(base, workspace))
	if err != nil {
		return nil, nil, id, err
	}
	// The runtime's own token: renewed at 80 % of its hour; each refresh and the
	// expiry are metrics, which alert rules watch.
	self := bearer.New(func(ctx context.Context) (bearer.Token, error) {
		return bearer.Request(ctx, directTokenTTL, func(ctx context.Context, tr *authenticationv1.TokenRequest) error {
			out, err := cs.CoreV1().ServiceAccounts(parts[0]).CreateToken(ctx, parts[1], tr, metav1.CreateOptions{})
			if err == nil {
				*tr = *out
			}
			return err
		})
	}, bearer.Options{
		Observe: func(t bearer.Token, err error) { metrics.RuntimeTokenRefreshed(provider, t.Expires, err) },
		Log:     log.FromContext(ctx).WithValues("token", "the runtime's direct-call token"),
	})
	if err := self.Refresh(ctx); err != nil {
		return nil, nil, id, fmt.Errorf("minting the runtime's direct-call token (needs create on serviceaccounts/token for itself in %s): %w", workspace, err)
	}
	go self.Renew(ctx)
	return base, self.Config(base), id, nil
}
