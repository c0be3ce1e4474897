// One file, one idea: the AccessRequest controller of the local platform, grant and
// release side by side.

package localplatform

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ctrlutils "github.com/openmcp-project/controller-utils/pkg/controller"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	cconst "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1/constants"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// reconcileAccessRequest plays the openmcp-operator's AccessRequest controller and a
// cluster provider's for one AccessRequest.
func (p *Platform) reconcileAccessRequest(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	ar := &clustersv1alpha1.AccessRequest{}
	if found, err := getLive(ctx, p.c, req.NamespacedName, ar); !found {
		return reconcile.Result{}, err
	}
	if !ar.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, p.releaseAccessRequest(ctx, ar)
	}

	now := time.Now()
	var end time.Time // when spec.ttl ends the request, zero if never
	if ar.Spec.TTL != nil {
		end = ar.CreationTimestamp.Add(ar.Spec.TTL.Duration)
		if p.opts.ClusterProviderOnly {
			// The openmcp-operator's access-request controller deletes it.
			end = time.Time{}
		} else if !now.Before(end) {
			log.Info("Deleting AccessRequest whose spec.ttl has passed", "ttl", ar.Spec.TTL.Duration)
			if err := p.c.Delete(ctx, ar, client.Preconditions{UID: &ar.UID}); err != nil && !apierrors.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("deleting expired AccessRequest %s: %w", req, err)
			}
			return reconcile.Result{}, nil
		}
	}

	// The operator labels a new request while this runs: a conflict is read again and
	// retried at once, not put into the controller's backoff (which delays the grant).
	if err := sharedFinalizer(ctx, p.c, ar, AccessFinalizer, addFinalizer); err != nil {
		return reconcile.Result{}, fmt.Errorf("adding finalizer to AccessRequest %s: %w", req, err)
	}
	if ar.Spec.Token == nil {
		return reconcile.Result{}, p.denyAccess(ctx, ar, ReasonUnsupported, "the local platform grants token access only, not OIDC")
	}

	t, reason, msg, err := p.resolveTarget(ctx, ar)
	if err != nil {
		return reconcile.Result{}, err
	}
	if t == nil {
		return reconcile.Result{RequeueAfter: p.opts.RetryInterval}, p.setAccessPending(ctx, ar, reason, msg)
	}
	id := AccessID(ar)

	if ar.Status.IsGranted() && ar.Status.ObservedGeneration == ar.Generation {
		// Granted as it is: only the token's age matters.
		renewAt, ok, err := p.currentToken(ctx, ar, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if ok && now.Before(renewAt) {
			next, err := p.sweepAnchors(ctx, t, id)
			if err != nil {
				return reconcile.Result{}, err
			}
			return requeueAt(renewAt, next, end), nil
		}
		log.Info("Renewing token")
	} else if p.opts.AccessRequestPolicy != nil {
		d := p.opts.AccessRequestPolicy(ctx, ar)
		if d.Deny {
			log.Info("Denying AccessRequest by policy", "reason", d.Reason)
			return reconcile.Result{}, p.denyAccess(ctx, ar, orDefault(d.Reason, ReasonDenied), d.Message)
		}
		if wait := time.Until(d.DelayUntil); wait > 0 {
			msg := orDefault(d.Message, "delayed until "+d.DelayUntil.UTC().Format(time.RFC3339))
			return reconcile.Result{RequeueAfter: wait}, p.setAccessPending(ctx, ar, orDefault(d.Reason, ReasonDelayed), msg)
		}
	}

	firstGrant := !ar.Status.IsGranted() || ar.Status.ObservedGeneration != ar.Generation
	renewAt, err := p.grantAccess(ctx, ar, t, id, now)
	if err != nil {
		// A failed renewal leaves a granted request granted: its token is still valid
		// for a while and the error is retried. A failed grant shows in the status.
		if firstGrant {
			if serr := p.setAccessPending(ctx, ar, ReasonTargetClusterInteractionProblem, err.Error()); serr != nil {
				log.Error(serr, "Updating status of AccessRequest")
			}
		}
		return reconcile.Result{}, err
	}
	if firstGrant {
		log.Info("Granted AccessRequest", "target", t.Name, "generation", ar.Generation)
	}
	next, err := p.sweepAnchors(ctx, t, id)
	if err != nil {
		return reconcile.Result{}, err
	}
	return requeueAt(renewAt, next, end), nil
}

// resolveTarget finds the target behind the Cluster ar refers to, directly or through a
// ClusterRequest. Like the openmcp-operator it then records spec.clusterRef and the
// provider and profile labels, and like a provider it notes the target in an
// annotation, before anything is created there. Without a target it returns the reason
// and message to show.
func (p *Platform) resolveTarget(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*target, string, string, error) {
	if p.opts.ClusterProviderOnly {
		return p.routedTarget(ctx, ar)
	}
	var key client.ObjectKey
	switch {
	case ar.Spec.ClusterRef != nil:
		key = ar.Spec.ClusterRef.NamespacedName()
	case ar.Spec.RequestRef != nil:
		cr := &clustersv1alpha1.ClusterRequest{}
		// From the cache: a grant not seen yet wakes this request through the watch.
		if err := p.cache.Get(ctx, ar.Spec.RequestRef.NamespacedName(), cr); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, cconst.ReasonInvalidReference, fmt.Sprintf("ClusterRequest %s not found", ar.Spec.RequestRef.NamespacedName()), nil
			}
			return nil, "", "", fmt.Errorf("getting ClusterRequest %s: %w", ar.Spec.RequestRef.NamespacedName(), err)
		}
		if !cr.Status.IsGranted() || cr.Status.Cluster == nil {
			return nil, cconst.ReasonWaitingForClusterRequest, fmt.Sprintf("ClusterRequest %s/%s is not granted", cr.Namespace, cr.Name), nil
		}
		key = cr.Status.Cluster.NamespacedName()
	default:
		return nil, cconst.ReasonConfigurationProblem, "neither spec.clusterRef nor spec.requestRef is set", nil
	}

	// Only its target label and profile are read, which never change.
	c := &clustersv1alpha1.Cluster{}
	if err := p.cache.Get(ctx, key, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cconst.ReasonInvalidReference, fmt.Sprintf("Cluster %s not found", key), nil
		}
		return nil, "", "", fmt.Errorf("getting Cluster %s: %w", key, err)
	}
	t := p.target(c.Labels[TargetLabel])
	if t == nil {
		return nil, ReasonNoTarget, fmt.Sprintf("Cluster %s is not backed by a target of this platform", key), nil
	}

	before := ar.DeepCopy()
	if ar.Labels == nil {
		ar.Labels = map[string]string{}
	}
	ar.Labels[clustersv1alpha1.ProviderLabel] = p.opts.ProviderName
	ar.Labels[clustersv1alpha1.ProfileLabel] = c.Spec.Profile
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations[TargetAnnotation] = t.Name
	if ar.Spec.ClusterRef == nil {
		// A spec change: the generation moves and is granted below.
		ar.Spec.ClusterRef = &commonapi.ObjectReference{Name: c.Name, Namespace: c.Namespace}
	}
	if !equality.Semantic.DeepEqual(before, ar) {
		if err := p.c.Patch(ctx, ar, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, "", "", fmt.Errorf("recording cluster of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
		}
	}
	return t, "", "", nil
}

// grantAccess creates the ServiceAccount and RBAC on t, mints a token, writes the
// access Secret and marks ar granted. It returns when the token is due for renewal.
func (p *Platform) grantAccess(ctx context.Context, ar *clustersv1alpha1.AccessRequest, t *target, id string, now time.Time) (time.Time, error) {
	sa, err := p.ensureRBAC(ctx, ar, t, id)
	if err != nil {
		return time.Time{}, err
	}
	tok, err := p.mintToken(ctx, t, sa, id, p.tokenTTL(ar, now))
	if err != nil {
		return time.Time{}, err
	}
	kcfg, err := kubeconfig.Render("cluster", kubeconfig.Server{URL: t.host, CAData: t.caData}, tok.Token)
	if err != nil {
		return time.Time{}, fmt.Errorf("creating kubeconfig: %w", err)
	}

	s := &corev1.Secret{}
	s.Name, s.Namespace = secretName(ar), ar.Namespace
	if _, err := controllerutil.CreateOrUpdate(ctx, p.c, s, func() error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[AccessIDLabel] = id
		s.Type = corev1.SecretTypeOpaque
		s.Data = map[string][]byte{
			clustersv1alpha1.SecretKeyKubeconfig:          kcfg,
			clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(strconv.FormatInt(tok.CreationTimestamp.Unix(), 10)),
			clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(strconv.FormatInt(tok.ExpirationTimestamp.Unix(), 10)),
		}
		if !p.opts.ClusterProviderOnly {
			// The real cluster providers write only the three keys above; the stand-in
			// scheduler's Secrets keep the others for the tests written against them.
			s.Data[clustersv1alpha1.SecretKeyToken] = []byte(tok.Token)
			s.Data[clustersv1alpha1.SecretKeyHost] = []byte(t.host)
			s.Data[clustersv1alpha1.SecretKeyCA] = t.caData
		}
		// For garbage collection on real clusters; envtest has none, hence the explicit
		// deletion in releaseAccessRequest.
		return controllerutil.SetControllerReference(ar, s, p.scheme)
	}); err != nil {
		return time.Time{}, fmt.Errorf("writing access Secret %s/%s: %w", s.Namespace, s.Name, err)
	}

	before := ar.DeepCopy()
	ar.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	ar.Status.SecretRef = &commonapi.LocalObjectReference{Name: s.Name}
	ar.Status.ObservedGeneration = ar.Generation
	setGrantedCondition(&ar.Status.Conditions, ar.Generation, metav1.ConditionTrue, ReasonGranted,
		fmt.Sprintf("token access to Cluster %s (target %s)", ar.Spec.ClusterRef.NamespacedName(), t.Name))
	if !equality.Semantic.DeepEqual(before.Status, ar.Status) {
		if err := p.c.Status().Patch(ctx, ar, client.MergeFrom(before)); err != nil {
			return time.Time{}, fmt.Errorf("granting AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
		}
	}
	return kubeconfig.RenewAt(tok.CreationTimestamp, tok.ExpirationTimestamp), nil
}

// currentToken reads the access Secret of a granted request and returns when its token
// is due for renewal; ok is false when there is no usable Secret for t.
func (p *Platform) currentToken(ctx context.Context, ar *clustersv1alpha1.AccessRequest, t *target) (renewAt time.Time, ok bool, err error) {
	if ar.Status.SecretRef == nil {
		return time.Time{}, false, nil
	}
	s := &corev1.Secret{}
	if err := p.c.Get(ctx, ar.Status.SecretRef.NamespacedName(ar.Namespace), s); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, fmt.Errorf("getting access Secret of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	created, err1 := strconv.ParseInt(string(s.Data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
	expires, err2 := strconv.ParseInt(string(s.Data[clustersv1alpha1.SecretKeyExpirationTimestamp]), 10, 64)
	if err1 != nil || err2 != nil || len(s.Data[clustersv1alpha1.SecretKeyKubeconfig]) == 0 || secretHost(s) != t.host {
		return time.Time{}, false, nil
	}
	return kubeconfig.RenewAt(time.Unix(created, 0), time.Unix(expires, 0)), true, nil
}

// tokenTTL is Options.TokenTTL, cut short so no token outlives the request's spec.ttl;
// whole seconds, as the Secret records them.
func (p *Platform) tokenTTL(ar *clustersv1alpha1.AccessRequest, now time.Time) time.Duration {
	ttl := p.opts.TokenTTL
	if ar.Spec.TTL != nil {
		if left := ar.CreationTimestamp.Add(ar.Spec.TTL.Duration).Sub(now); left < ttl {
			ttl = left
		}
	}
	return max(ttl.Truncate(time.Second), time.Second)
}

// denyAccess removes whatever ar was granted before and marks it Denied.
func (p *Platform) denyAccess(ctx context.Context, ar *clustersv1alpha1.AccessRequest, reason, message string) error {
	if err := p.cleanupAccess(ctx, ar); err != nil {
		return err
	}
	return p.patchAccessStatus(ctx, ar, clustersv1alpha1.REQUEST_DENIED, reason, message)
}

// setAccessPending marks the current generation of ar as not granted (yet). Anything
// granted for an earlier generation stays until it is replaced or released.
func (p *Platform) setAccessPending(ctx context.Context, ar *clustersv1alpha1.AccessRequest, reason, message string) error {
	return p.patchAccessStatus(ctx, ar, clustersv1alpha1.REQUEST_PENDING, reason, message)
}

// patchAccessStatus writes a phase other than granted on the current generation of
// ar; a denial also drops the Secret reference, whose Secret cleanupAccess removed.
func (p *Platform) patchAccessStatus(ctx context.Context, ar *clustersv1alpha1.AccessRequest, phase, reason, message string) error {
	before := ar.DeepCopy()
	ar.Status.Phase = phase
	if phase == clustersv1alpha1.REQUEST_DENIED {
		ar.Status.SecretRef = nil
	}
	ar.Status.ObservedGeneration = ar.Generation
	setGrantedCondition(&ar.Status.Conditions, ar.Generation, metav1.ConditionFalse, reason, message)
	if equality.Semantic.DeepEqual(before.Status, ar.Status) {
		return nil
	}
	if err := p.c.Status().Patch(ctx, ar, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("setting AccessRequest %s/%s %s: %w", ar.Namespace, ar.Name, phase, err)
	}
	return nil
}

// releaseAccessRequest removes what was created for ar, then the platform's finalizer.
// The requester's finalizer is left for the requester, which waits for ours to go.
func (p *Platform) releaseAccessRequest(ctx context.Context, ar *clustersv1alpha1.AccessRequest) error {
	if !controllerutil.ContainsFinalizer(ar, AccessFinalizer) {
		return nil
	}
	if err := p.cleanupAccess(ctx, ar); err != nil {
		return err
	}
	if err := removeFinalizer(ctx, p.c, ar, AccessFinalizer); err != nil {
		return fmt.Errorf("removing finalizer from AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released AccessRequest")
	return nil
}

// cleanupAccess deletes the ServiceAccount, RBAC and token anchors created for ar on
// the target recorded in its annotation, and the access Secret.
func (p *Platform) cleanupAccess(ctx context.Context, ar *clustersv1alpha1.AccessRequest) error {
	id := AccessID(ar)
	if name := ar.Annotations[TargetAnnotation]; name != "" {
		if t := p.target(name); t != nil {
			if err := p.cleanupTarget(ctx, t, id, nil); err != nil {
				return err
			}
		} else {
			// Nothing can be done without credentials; blocking the deletion forever
			// would not help anybody either.
			ctrl.LoggerFrom(ctx).Info("Target of AccessRequest is no longer configured, leaving its objects there", "target", name)
		}
	}
	names := []string{secretName(ar)}
	if ar.Status.SecretRef != nil && ar.Status.SecretRef.Name != names[0] {
		names = append(names, ar.Status.SecretRef.Name)
	}
	for _, name := range names {
		s := &corev1.Secret{}
		if err := p.c.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting access Secret %s/%s: %w", ar.Namespace, name, err)
		}
		if s.Labels[AccessIDLabel] != id {
			continue // not ours
		}
		if err := p.c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting access Secret %s/%s: %w", ar.Namespace, name, err)
		}
	}
	return nil
}

// secretHost is the API server an access Secret grants access to: its host key, or
// the server of its kubeconfig when it has only that (the real providers' format).
func secretHost(s *corev1.Secret) string {
	if h, ok := s.Data[clustersv1alpha1.SecretKeyHost]; ok {
		return string(h)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(cfg.Host, "/")
}

// AccessID identifies an AccessRequest in the labels and names of what the local
// platform creates for it on a target; tests use it to count those objects.
func AccessID(ar *clustersv1alpha1.AccessRequest) string {
	//nolint:staticcheck // openMCP cluster providers name access objects with this hash; a stand-in names them alike
	return ctrlutils.K8sNameUUIDUnsafe(ar.Namespace, ar.Name)
}

// secretName is the name of the access Secret next to ar.
func secretName(ar *clustersv1alpha1.AccessRequest) string {
	return ctrlutils.ShortenToXCharactersUnsafe(ar.Name+".kubeconfig", 253)
}

// requeueAt asks to be called again at the earliest of the non-zero times.
func requeueAt(times ...time.Time) reconcile.Result {
	var first time.Time
	for _, t := range times {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() {
		return reconcile.Result{}
	}
	// A floor keeps a time that has just passed from spinning the controller.
	return reconcile.Result{RequeueAfter: max(time.Until(first), 100*time.Millisecond)}
}
