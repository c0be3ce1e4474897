package tokens

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kcp-dev/logicalcluster/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clusterNameExtra is the user-info extra in which kcp records the logical cluster a
// ServiceAccount token was issued in.
const clusterNameExtra = "authentication.kcp.io/cluster-name"

const serviceAccountPrefix = "system:serviceaccount:"

// Identity is who the runtime is to kcp: the user its direct credential authenticates
// as. The tenant-side RBAC that lets the runtime mint tokens names it.
type Identity struct {
	// Username as authenticated, e.g. "system:serviceaccount:sp:runtime" or "kcp-admin".
	Username string
	// Groups as authenticated.
	Groups []string
	// ClusterName is the logical cluster a ServiceAccount belongs to (from the extra
	// authentication.kcp.io/cluster-name); empty for other users.
	ClusterName logicalcluster.Name
	// IsServiceAccount says whether Username is a ServiceAccount.
	IsServiceAccount bool
}

// DetectIdentity asks kcp who cfg authenticates as, with a SelfSubjectReview
// (authentication.k8s.io/v1). cfg may point at kcp's base URL or at the identity's own
// workspace; both give the same answer (docs/design/tenant-credentials.md, "Which
// subject names the runtime").
func DetectIdentity(ctx context.Context, cfg *rest.Config) (Identity, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Identity{}, fmt.Errorf("detecting identity: %w", err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("detecting identity: SelfSubjectReview: %w", err)
	}
	u := review.Status.UserInfo
	if u.Username == "" {
		return Identity{}, errors.New("detecting identity: SelfSubjectReview returned no username")
	}
	id := Identity{
		Username:         u.Username,
		Groups:           u.Groups,
		IsServiceAccount: strings.HasPrefix(u.Username, serviceAccountPrefix),
	}
	if v := u.Extra[clusterNameExtra]; len(v) == 1 {
		id.ClusterName = logicalcluster.Name(v[0])
	}
	return id, nil
}

// Subjects returns the RBAC subjects that match this identity when it calls another
// workspace directly.
//
// A plain user (e.g. kcp-admin) is bound by its name. A ServiceAccount of workspace
// <lc> is foreign everywhere else and its name alone matches nothing there:
//   - with kcp's GlobalServiceAccount feature gate (globalServiceAccounts true) it is
//     matched as User "system:kcp:serviceaccount:<lc>:<namespace>:<name>": exactly
//     this ServiceAccount.
//   - without the gate only Group "system:cluster:<lc>" matches, and that group is held
//     by every ServiceAccount of <lc> (and any other credential scoped to <lc>). Binding
//     it extends the tenant's trust to the whole provider workspace, not to the runtime
//     alone.
func (id Identity) Subjects(globalServiceAccounts bool) []rbacv1.Subject {
	if !id.IsServiceAccount || id.ClusterName == "" {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: id.Username}}
	}
	if globalServiceAccounts {
		name := "system:kcp:serviceaccount:" + id.ClusterName.String() + ":" + strings.TrimPrefix(id.Username, serviceAccountPrefix)
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	return []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:cluster:" + id.ClusterName.String()}}
}

// needsGateDetection says whether the subject depends on the GlobalServiceAccount gate.
func (id Identity) needsGateDetection() bool {
	return id.IsServiceAccount && id.ClusterName != ""
}

func (m *Minter) getIdentity(ctx context.Context) (Identity, error) {
	m.mu.Lock()
	id := m.identity
	m.mu.Unlock()
	if id != nil {
		return *id, nil
	}
	detected, err := DetectIdentity(ctx, m.opts.Direct)
	if err != nil {
		return Identity{}, fmt.Errorf("tokens: %w", err)
	}
	m.mu.Lock()
	m.identity = &detected
	m.mu.Unlock()
	return detected, nil
}
