// One file, one idea: the kubelet stand-in, which turns Pods into processes and back;
// its parts (volumes, environment, status) only make sense together.

package localenv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// KubeletOptions configure StartKubelet.
type KubeletOptions struct {
	// Namespace whose Jobs and Deployments run: the openmcp-operator's. Default
	// DefaultOperatorNamespace.
	Namespace string
	// Images maps a container image to the executable standing for it (the image's
	// entrypoint). A pod whose image is not mapped is refused.
	Images map[string]string
	// TokenTTL is the lifetime of the ServiceAccount token a pod gets; default 24 hours.
	// It is not renewed (a real kubelet renews projected tokens).
	TokenTTL time.Duration
	// JobBackoff is how long a failed Job waits before its next pod, doubling with
	// every failure up to six minutes; default 10 s, the job controller's.
	JobBackoff time.Duration
	// RestartBackoff is how long a Deployment's pod that exited waits before it is
	// restarted, doubling up to five minutes; default 10 s, the kubelet's
	// CrashLoopBackOff.
	RestartBackoff time.Duration
}

// Kubelet stands in for the kubelet (and the job and deployment controllers' status
// bookkeeping) of the platform cluster: it runs the Jobs and Deployments of one
// namespace as processes and reports their status. It exists because the local
// platform is a bare kube-apiserver with no nodes, and the openmcp-operator's
// deployment controller waits for its init Job to succeed and its Deployment to be
// available before it goes on.
//
// What a pod gets is what its spec says, as a kubelet gives it: the container's args
// after the mapped executable, its env (value or fieldRef metadata.name,
// metadata.namespace, spec.serviceAccountName, status.podIP, status.hostIP), and the
// identity of spec.serviceAccountName: a TokenRequest token of that account in a
// kubeconfig named by $KUBECONFIG (nothing when automountServiceAccountToken is
// false). No admin credential and none of the starter's environment besides PATH
// reach the process; HOME and TMPDIR are the pod's own folder. Pods share this machine's network: ports are host ports.
//
// Refused, because they would change what the process sees and are not emulated:
// more than one container, initContainers, command (the image's entrypoint is the
// mapped executable), workingDir, envFrom, env from Secrets, ConfigMaps or resource
// fields, $(VAR) references in args, volumes and volumeMounts, probes and lifecycle
// hooks. A refused pod never starts (Refused lists why), as a real one would stay in
// CreateContainerConfigError. Ignored, because they only concern isolation,
// scheduling or pulling: image pull policy and secrets, ports, resources, security
// contexts, node selection, labels and annotations.
//
// Jobs: pods run one at a time (parallelism and completions 1, restartPolicy Never);
// a failure is followed by a new pod after JobBackoff until spec.backoffLimit
// failures are exceeded. Status is the job controller's: startTime, active,
// succeeded/failed counts, and on success completionTime with SuccessCriteriaMet and
// Complete, on failure FailureTarget and Failed (reason BackoffLimitExceeded).
// Deployments: spec.replicas pods, restarted when they exit. A new pod template
// replaces the pods by spec.strategy, as the deployment controller does: Recreate
// stops every old pod, then starts the new ones; RollingUpdate (the API's default)
// starts new pods while at most replicas+maxSurge run, and stops old ones as new ones
// become ready while at least replicas-maxUnavailable are ready (defaults 25 % each,
// surge rounded up, unavailable down, 1 unavailable if both come to 0). Status carries
// observedGeneration, replicas (every pod, old ones included), updatedReplicas (of the
// current template), ready and available replicas (a pod without probes is ready once
// its process runs) and the Available and Progressing conditions. Deleting the object
// stops all its pods at once.
type Kubelet struct {
	env   *Env
	opts  KubeletOptions
	admin *rest.Config
	cs    kubernetes.Interface
	log   *log.Logger
	queue workqueue.TypedRateLimitingInterface[kubeletKey]
	jobs  interface {
		Get(ns, name string) (*batchv1.Job, error)
	}
	deployments interface {
		Get(ns, name string) (*appsv1.Deployment, error)
	}

	mu          sync.Mutex
	jobRuns     map[types.NamespacedName]*jobRun
	deployRuns  map[types.NamespacedName]*deployRun
	refused     []error
	refusedKeys map[kubeletKey]string
}

// kubeletKey is a Job or Deployment to look at.
type kubeletKey struct {
	deployment bool
	types.NamespacedName
}

func (k kubeletKey) String() string {
	if k.deployment {
		return "Deployment " + k.NamespacedName.String()
	}
	return "Job " + k.NamespacedName.String()
}

// StartKubelet runs the Jobs and Deployments of opts.Namespace on the platform
// cluster as processes until the Env stops (see Kubelet).
func (e *Env) StartKubelet(ctx context.Context, platform *APIServer, opts KubeletOptions) (*Kubelet, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultOperatorNamespace
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = 24 * time.Hour
	}
	if opts.JobBackoff == 0 {
		opts.JobBackoff = 10 * time.Second
	}
	if opts.RestartBackoff == 0 {
		opts.RestartBackoff = 10 * time.Second
	}
	cs, err := kubernetes.NewForConfig(platform.Config)
	if err != nil {
		return nil, fmt.Errorf("kubelet: clientset: %w", err)
	}
	logFile, err := e.openLog("kubelet")
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		env: e, opts: opts, admin: platform.Config, cs: cs,
		log:         log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
		queue:       workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[kubeletKey]()),
		jobRuns:     map[types.NamespacedName]*jobRun{},
		deployRuns:  map[types.NamespacedName]*deployRun{},
		refusedKeys: map[kubeletKey]string{},
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(opts.Namespace))
	jobInformer, deployInformer := factory.Batch().V1().Jobs(), factory.Apps().V1().Deployments()
	k.jobs = listerGetter[*batchv1.Job](func(ns, name string) (*batchv1.Job, error) { return jobInformer.Lister().Jobs(ns).Get(name) })
	k.deployments = listerGetter[*appsv1.Deployment](func(ns, name string) (*appsv1.Deployment, error) {
		return deployInformer.Lister().Deployments(ns).Get(name)
	})
	for informer, deployment := range map[cache.SharedIndexInformer]bool{jobInformer.Informer(): false, deployInformer.Informer(): true} {
		enqueue := func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				k.queue.Add(kubeletKey{deployment: deployment, NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
		}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
		}); err != nil {
			_ = logFile.Close()
			return nil, fmt.Errorf("kubelet: %w", err)
		}
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(kctx.Done())
	var workers sync.WaitGroup
	stop := func() error {
		cancel()
		k.queue.ShutDown()
		workers.Wait()
		factory.Shutdown()
		k.stopAll()
		return logFile.Close()
	}
	for informer, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			_ = stop()
			return nil, fmt.Errorf("kubelet: %v did not sync", informer)
		}
	}
	for range 4 {
		workers.Go(func() {
			for k.next(kctx) {
			}
		})
	}
	e.onStop("kubelet", stop)
	k.log.Printf("watching Jobs and Deployments in namespace %s", opts.Namespace)
	return k, nil
}

// listerGetter adapts a lister's Get.
type listerGetter[T any] func(ns, name string) (T, error)

func (f listerGetter[T]) Get(ns, name string) (T, error) { return f(ns, name) }

// Refused says which Jobs and Deployments the kubelet refused to run, and why.
func (k *Kubelet) Refused() []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.refused)
}

// Running lists the pods (namespace/name) whose process runs now.
func (k *Kubelet) Running() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, r := range k.jobRuns {
		if p := r.current.Load(); p != nil && !p.Exited() {
			out = append(out, r.key.Namespace+"/"+p.Name)
		}
	}
	for key, r := range k.deployRuns {
		for _, pods := range [][]*alwaysPod{r.old, r.pods} {
			for _, p := range pods {
				if p.ready.Load() {
					out = append(out, key.Namespace+"/"+p.name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func (k *Kubelet) next(ctx context.Context) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	var err error
	if key.deployment {
		err = k.syncDeployment(ctx, key)
	} else {
		err = k.syncJob(ctx, key)
	}
	if err != nil && ctx.Err() == nil {
		k.log.Printf("%s: %v (retrying)", key, err)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// refuse records why key's pods do not run, once per reason.
func (k *Kubelet) refuse(key kubeletKey, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refusedKeys[key] == err.Error() {
		return
	}
	k.refusedKeys[key] = err.Error()
	err = fmt.Errorf("%s: %w", key, err)
	k.refused = append(k.refused, err)
	k.log.Printf("refused: %v", err)
}

// stopAll stops every pod, at the Env's stop.
func (k *Kubelet) stopAll() {
	k.mu.Lock()
	jobs, deploys := k.jobRuns, k.deployRuns
	k.jobRuns, k.deployRuns = map[types.NamespacedName]*jobRun{}, map[types.NamespacedName]*deployRun{}
	k.mu.Unlock()
	for _, r := range jobs {
		r.stop()
	}
	for _, r := range deploys {
		r.stop()
	}
}

// --- Jobs ---

// jobRun is one Job (by UID) being run.
type jobRun struct {
	key     types.NamespacedName
	uid     types.UID
	cancel  context.CancelFunc
	done    chan struct{}
	current atomic.Pointer[Process]
}

func (r *jobRun) stop() {
	r.cancel()
	<-r.done
}

func (k *Kubelet) syncJob(ctx context.Context, key kubeletKey) error {
	job, err := k.jobs.Get(key.Namespace, key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// Only this worker changes key's run: the queue hands a key to one worker at a
	// time. The lock guards the map for Running and stopAll.
	k.mu.Lock()
	run := k.jobRuns[key.NamespacedName]
	k.mu.Unlock()
	if run != nil && (job == nil || run.uid != job.UID) {
		// Deleted, or deleted and re-created (the operator's way of re-running init).
		k.log.Printf("%s: gone, stopping its pod", key)
		run.stop()
		k.mu.Lock()
		delete(k.jobRuns, key.NamespacedName)
		k.mu.Unlock()
		run = nil
	}
	if job == nil || run != nil || jobFinished(job) {
		return nil
	}
	if err := checkPodSpec(&job.Spec.Template.Spec, k.opts.Images); err != nil {
		k.refuse(key, err)
		return nil
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		k.refuse(key, fmt.Errorf("restartPolicy %q: only Never is supported", job.Spec.Template.Spec.RestartPolicy))
		return nil
	}
	if p := job.Spec.Parallelism; p != nil && *p != 1 {
		k.refuse(key, fmt.Errorf("parallelism %d: only 1 is supported", *p))
		return nil
	}
	if c := job.Spec.Completions; c != nil && *c != 1 {
		k.refuse(key, fmt.Errorf("completions %d: only 1 is supported", *c))
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	run = &jobRun{key: key.NamespacedName, uid: job.UID, cancel: cancel, done: make(chan struct{})}
	k.mu.Lock()
	k.jobRuns[key.NamespacedName] = run
	k.mu.Unlock()
	go func() {
		defer close(run.done)
		k.runJob(rctx, run, job.DeepCopy())
	}()
	return nil
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// runJob runs job's pods one after the other until one succeeds or backoffLimit
// failures are exceeded, writing the status as the job controller does.
func (k *Kubelet) runJob(ctx context.Context, run *jobRun, job *batchv1.Job) {
	backoffLimit := int32(6) // the API's default
	if job.Spec.BackoffLimit != nil {
		backoffLimit = *job.Spec.BackoffLimit
	}
	failed := job.Status.Failed
	backoff := k.opts.JobBackoff
	for {
		podName := job.Name + "-" + randomSuffix()
		k.log.Printf("Job %s/%s: starting pod %s", job.Namespace, job.Name, podName)
		proc, err := k.startContainer(ctx, job.Namespace, podName, &job.Spec.Template.Spec)
		if err == nil {
			run.current.Store(proc)
			if err := k.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
				if s.StartTime == nil {
					s.StartTime = ptr.To(metav1.Now())
				}
				s.Active, s.Ready = 1, ptr.To[int32](1)
			}); err != nil {
				k.log.Printf("Job %s/%s: %v", job.Namespace, job.Name, err)
			}
			select {
			case <-ctx.Done():
				k.stopProcess(proc, &job.Spec.Template.Spec)
				return
			case <-proc.Done():
			}
			err = proc.Err()
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			k.log.Printf("Job %s/%s: pod %s succeeded", job.Namespace, job.Name, podName)
			if err := k.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
				now := metav1.Now()
				if s.StartTime == nil {
					s.StartTime = &now
				}
				s.Active, s.Ready, s.Succeeded, s.CompletionTime = 0, ptr.To[int32](0), 1, &now
				s.Conditions = append(s.Conditions,
					jobCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
					jobCondition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"))
			}); err != nil {
				k.log.Printf("Job %s/%s: %v", job.Namespace, job.Name, err)
			}
			return
		}
		failed++
		k.log.Printf("Job %s/%s: pod %s failed (%d of at most %d): %v", job.Namespace, job.Name, podName, failed, backoffLimit+1, err)
		final := failed > backoffLimit
		if err := k.updateJobStatus(ctx, job, func(s *batchv1.JobStatus) {
			if s.StartTime == nil {
				s.StartTime = ptr.To(metav1.Now())
			}
			s.Active, s.Ready, s.Failed = 0, ptr.To[int32](0), failed
			if final {
				s.Conditions = append(s.Conditions,
					jobCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
					jobCondition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"))
			}
		}); err != nil {
			k.log.Printf("Job %s/%s: %v", job.Namespace, job.Name, err)
		}
		if final {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 6*time.Minute)
	}
}

func jobCondition(t batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	now := metav1.Now()
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now}
}

// updateJobStatus applies mutate to the Job's current status, if it is still the same
// Job.
func (k *Kubelet) updateJobStatus(ctx context.Context, job *batchv1.Job, mutate func(*batchv1.JobStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != job.UID {
			return nil
		}
		mutate(&cur.Status)
		_, err = k.cs.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// --- Deployments ---

// deployRun is one Deployment (by UID) being run: the pods of its current template
// and, during a rollout, those of earlier templates still running.
type deployRun struct {
	uid      types.UID
	template *corev1.PodTemplateSpec
	// hash names the current template's pods, as a ReplicaSet's pod-template-hash.
	hash string
	// rolledOut says the current template once had every replica ready; the
	// Progressing condition then no longer says the rollout goes on.
	rolledOut bool
	// pods are of the current template, old of earlier ones; both change under
	// Kubelet.mu, which Running reads them under.
	pods []*alwaysPod
	old  []*alwaysPod
}

// stop stops every pod; the run is not used afterwards.
func (r *deployRun) stop() {
	for _, pods := range [][]*alwaysPod{r.old, r.pods} {
		for _, p := range pods {
			p.stop()
		}
	}
}

func (k *Kubelet) syncDeployment(ctx context.Context, key kubeletKey) error {
	d, err := k.deployments.Get(key.Namespace, key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	k.mu.Lock()
	run := k.deployRuns[key.NamespacedName]
	k.mu.Unlock()
	// Only this worker changes key's run: the queue hands a key to one worker at a
	// time. The lock guards the map and the pod lists for Running and stopAll.
	if run != nil && (d == nil || run.uid != d.UID) {
		// Deleted, or deleted and re-created: no strategy applies to pods whose
		// Deployment is gone, they all stop.
		k.log.Printf("%s: gone, stopping its pods", key)
		run.stop()
		k.forgetDeployRun(key)
		run = nil
	}
	if d == nil {
		return nil
	}
	surge, unavailable, err := rolloutBudget(d)
	if err != nil {
		k.refuse(key, err)
		return nil
	}
	recreate := d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType
	if run == nil || !equality.Semantic.DeepEqual(run.template, &d.Spec.Template) {
		if err := checkDeploymentPodSpec(&d.Spec.Template.Spec, k.opts.Images); err != nil {
			// A real pod of this template would never become ready: under Recreate
			// nothing runs any more, under RollingUpdate the old pods keep running.
			if run != nil && recreate {
				k.log.Printf("%s: new pod template refused, stopping its pods", key)
				run.stop()
				k.forgetDeployRun(key)
			}
			k.refuse(key, err)
			return nil
		}
		if run == nil {
			run = &deployRun{uid: d.UID}
			k.mu.Lock()
			k.deployRuns[key.NamespacedName] = run
			k.mu.Unlock()
		} else {
			k.log.Printf("%s: new pod template, replacing %d pods (%s)", key, len(run.old)+len(run.pods), strategyName(d))
		}
		k.mu.Lock()
		run.old, run.pods = append(run.old, run.pods...), nil
		k.mu.Unlock()
		run.template, run.hash, run.rolledOut = d.Spec.Template.DeepCopy(), randomSuffix(), false
	}
	want := int(ptr.Deref(d.Spec.Replicas, 1))
	if recreate {
		// Every old pod has stopped before a new one starts.
		k.stopDeployPods(key, run, slices.Clone(run.old))
		k.scaleDeployPods(ctx, key, d, run, want)
	} else if k.rollStep(ctx, key, d, run, want, surge, unavailable) {
		// The deployment controller takes one step per sync and writes the status in
		// between, so that old and new pods are seen side by side; the next step is due
		// at once, not only when a pod's readiness changes.
		k.queue.Add(key)
	}
	k.mu.Lock()
	c := deployCounts{
		replicas: int32(len(run.old) + len(run.pods)), updated: int32(len(run.pods)),
		ready:          int32(countReady(run.old) + countReady(run.pods)),
		maxUnavailable: int32(unavailable),
	}
	k.mu.Unlock()
	c.complete = c.replicas == int32(want) && c.updated == int32(want) && c.ready == int32(want)
	run.rolledOut = run.rolledOut || c.complete
	c.rollingOut = !run.rolledOut
	return k.updateDeploymentStatus(ctx, d, c)
}

// checkDeploymentPodSpec refuses what checkPodSpec does, and a restartPolicy other
// than a Deployment's.
func checkDeploymentPodSpec(spec *corev1.PodSpec, images map[string]string) error {
	if err := checkPodSpec(spec, images); err != nil {
		return err
	}
	if rp := spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		return fmt.Errorf("restartPolicy %q: a Deployment's pods restart Always", rp)
	}
	return nil
}

func (k *Kubelet) forgetDeployRun(key kubeletKey) {
	k.mu.Lock()
	delete(k.deployRuns, key.NamespacedName)
	k.mu.Unlock()
}

func strategyName(d *appsv1.Deployment) string {
	if d.Spec.Strategy.Type == "" {
		return string(appsv1.RollingUpdateDeploymentStrategyType)
	}
	return string(d.Spec.Strategy.Type)
}

// rolloutBudget resolves a RollingUpdate's maxSurge and maxUnavailable against
// spec.replicas as the deployment controller does (ResolveFenceposts): percentages
// of surge round up, of unavailable down, so that one replica surges by one and never
// goes unavailable; if both come to 0 one pod may be unavailable, or the rollout could
// not move. Unset values are the API's defaults, 25 % each. Recreate has neither.
func rolloutBudget(d *appsv1.Deployment) (surge, unavailable int, err error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return 0, 0, nil
	case "", appsv1.RollingUpdateDeploymentStrategyType:
	default:
		return 0, 0, fmt.Errorf("strategy %q: only Recreate and RollingUpdate are supported", d.Spec.Strategy.Type)
	}
	maxSurge, maxUnavailable := intstr.FromString("25%"), intstr.FromString("25%")
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			maxSurge = *ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			maxUnavailable = *ru.MaxUnavailable
		}
	}
	replicas := int(ptr.Deref(d.Spec.Replicas, 1))
	if surge, err = intstr.GetScaledValueFromIntOrPercent(&maxSurge, replicas, true); err != nil {
		return 0, 0, fmt.Errorf("strategy maxSurge: %w", err)
	}
	if unavailable, err = intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, replicas, false); err != nil {
		return 0, 0, fmt.Errorf("strategy maxUnavailable: %w", err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable, nil
}

// rollStep takes one step of a RollingUpdate, the deployment controller's
// (rolloutRolling): scale the current template to want pods while at most
// want+surge run in all; else stop old pods while at least want-unavailable stay
// ready, not-ready old ones first (they cost no availability) and without counting
// on new pods that are not ready yet. It says whether it changed anything.
func (k *Kubelet) rollStep(ctx context.Context, key kubeletKey, d *appsv1.Deployment, run *deployRun, want, surge, unavailable int) bool {
	if len(run.pods) > want {
		k.scaleDeployPods(ctx, key, d, run, want)
		return true
	}
	if n := min(want+surge-len(run.old)-len(run.pods), want-len(run.pods)); n > 0 {
		k.scaleDeployPods(ctx, key, d, run, len(run.pods)+n)
		return true
	}
	if len(run.old) == 0 {
		return false
	}
	// One look at readiness, so that the budget and the choice agree.
	k.mu.Lock()
	old := slices.Clone(run.old)
	newReady := countReady(run.pods)
	k.mu.Unlock()
	oldReady := make([]bool, len(old))
	for i, p := range old {
		oldReady[i] = p.ready.Load()
	}
	// The controller's maxScaledDown: all pods, less those that must stay available,
	// less the new ones not ready yet (they may never be).
	minAvailable := want - unavailable
	budget := len(old) + len(run.pods) - minAvailable - (len(run.pods) - newReady)
	if budget <= 0 {
		return false
	}
	var stop []*alwaysPod
	for i, p := range old {
		if !oldReady[i] && len(stop) < budget {
			stop = append(stop, p)
		}
	}
	spare := newReady - minAvailable
	for _, r := range oldReady {
		if r {
			spare++
		}
	}
	// Oldest first, as the controller scales down the oldest ReplicaSets first.
	for i, p := range old {
		if oldReady[i] && spare > 0 {
			stop = append(stop, p)
			spare--
		}
	}
	k.stopDeployPods(key, run, stop)
	return len(stop) > 0
}

// scaleDeployPods starts or stops pods of run's current template until n run.
func (k *Kubelet) scaleDeployPods(ctx context.Context, key kubeletKey, d *appsv1.Deployment, run *deployRun, n int) {
	for len(run.pods) < n {
		p := &alwaysPod{
			k: k, namespace: d.Namespace, spec: &run.template.Spec,
			name:     d.Name + "-" + run.hash + "-" + randomSuffix(),
			changed:  func() { k.queue.Add(key) },
			stopping: make(chan struct{}), done: make(chan struct{}),
		}
		k.mu.Lock()
		run.pods = append(run.pods, p)
		k.mu.Unlock()
		go p.run(context.WithoutCancel(ctx))
	}
	if len(run.pods) > n {
		k.stopDeployPods(key, run, slices.Clone(run.pods[n:]))
	}
}

// stopDeployPods stops pods of run, old or current, and forgets them; pods must not
// alias run's lists, which it edits.
func (k *Kubelet) stopDeployPods(key kubeletKey, run *deployRun, pods []*alwaysPod) {
	if len(pods) == 0 {
		return
	}
	for _, p := range pods {
		k.log.Printf("%s: stopping pod %s", key, p.name)
		p.stop()
	}
	stopped := func(p *alwaysPod) bool { return slices.Contains(pods, p) }
	k.mu.Lock()
	run.old, run.pods = slices.DeleteFunc(run.old, stopped), slices.DeleteFunc(run.pods, stopped)
	k.mu.Unlock()
}

// countReady counts the ready pods; the caller holds Kubelet.mu if pods may change.
func countReady(pods []*alwaysPod) int {
	n := 0
	for _, p := range pods {
		if p.ready.Load() {
			n++
		}
	}
	return n
}

// deployCounts is what a Deployment's status reports of its pods.
type deployCounts struct {
	// replicas run, old templates' included; updated are of the current template.
	replicas, updated, ready int32
	// maxUnavailable is the rollout's budget (0 under Recreate): Available needs
	// spec.replicas-maxUnavailable ready pods, as the controller judges it, so that a
	// rolling update keeps it true.
	maxUnavailable int32
	// complete: every pod is of the current template and ready, spec.replicas of
	// them. rollingOut: the current template has not been complete yet.
	complete, rollingOut bool
}

// updateDeploymentStatus writes what the deployment controller would, from the pods
// running now.
func (k *Kubelet) updateDeploymentStatus(ctx context.Context, d *appsv1.Deployment, c deployCounts) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != d.UID {
			return nil
		}
		want := ptr.Deref(cur.Spec.Replicas, 1)
		s := cur.Status.DeepCopy()
		s.ObservedGeneration = d.Generation
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = c.replicas, c.updated, c.ready, c.ready
		s.UnavailableReplicas = max(c.replicas-c.ready, 0)
		available := corev1.ConditionFalse
		reason, msg := "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
		if c.ready >= want-c.maxUnavailable {
			available, reason, msg = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
		}
		setDeploymentCondition(s, appsv1.DeploymentAvailable, available, reason, msg)
		switch {
		case c.complete:
			setDeploymentCondition(s, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "The pods of the current template run.")
		case c.rollingOut:
			setDeploymentCondition(s, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", "The pods of the current template are being rolled out.")
		}
		// Otherwise the template was rolled out and a pod has exited since: the
		// controller leaves Progressing as it was while nothing progresses.
		if equality.Semantic.DeepEqual(s, &cur.Status) {
			return nil
		}
		cur.Status = *s
		_, err = k.cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func setDeploymentCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string) {
	now := metav1.Now()
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		if c.Status != status || c.Reason != reason {
			c.LastUpdateTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now,
	})
}

// alwaysPod is a Deployment's pod: its process is restarted whenever it exits, after
// a growing back-off, until the pod is stopped.
type alwaysPod struct {
	k         *Kubelet
	namespace string
	name      string
	spec      *corev1.PodSpec
	// changed tells the Deployment's sync that readiness changed.
	changed  func()
	ready    atomic.Bool
	stopping chan struct{}
	done     chan struct{}
	once     sync.Once
}

func (p *alwaysPod) stop() {
	p.once.Do(func() { close(p.stopping) })
	<-p.done
}

func (p *alwaysPod) run(ctx context.Context) {
	defer close(p.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := p.k.opts.RestartBackoff
	for {
		p.k.log.Printf("pod %s/%s: starting", p.namespace, p.name)
		proc, err := p.k.startContainer(ctx, p.namespace, p.name, p.spec)
		if err == nil {
			p.ready.Store(true)
			p.changed()
			select {
			case <-p.stopping:
				p.k.stopProcess(proc, p.spec)
				p.ready.Store(false)
				return
			case <-proc.Done():
			}
			p.ready.Store(false)
			p.changed()
			err = proc.Ended()
		}
		select {
		case <-p.stopping:
			return
		default:
		}
		p.k.log.Printf("pod %s/%s: ended (%v), restarting in %s", p.namespace, p.name, err, backoff)
		select {
		case <-p.stopping:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
}

// --- Pods ---

// stopProcess stops a pod's process as the kubelet does: SIGTERM, then SIGKILL after
// the pod's termination grace period (default 30 s).
func (k *Kubelet) stopProcess(p *Process, spec *corev1.PodSpec) {
	grace := 30 * time.Second
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if err := p.Stop(grace); err != nil {
		k.log.Printf("%v", err)
	}
}

// startContainer starts the single container of a pod (checked by checkPodSpec) as a
// process: the mapped executable with the container's args, its env resolved, and
// the ServiceAccount's kubeconfig.
func (k *Kubelet) startContainer(ctx context.Context, namespace, podName string, spec *corev1.PodSpec) (*Process, error) {
	c := spec.Containers[0]
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	// The pod's own folder is its home and /tmp, as a container has its own.
	dir := filepath.Join(k.env.Dir, "pods", namespace, podName)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("pod %s: %w", podName, err)
	}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + filepath.Join(dir, "tmp")}
	if ptr.Deref(spec.AutomountServiceAccountToken, true) {
		raw, err := ServiceAccountKubeconfig(ctx, k.admin, namespace, sa, k.opts.TokenTTL)
		if err != nil {
			return nil, fmt.Errorf("pod %s: the token of ServiceAccount %s: %w", podName, sa, err)
		}
		path, err := k.env.WriteFile(filepath.Join(dir, "kubeconfig"), raw)
		if err != nil {
			return nil, err
		}
		base = append(base, "KUBECONFIG="+path)
	}
	var env []string
	for _, ev := range c.Env {
		v, err := envValue(ev, namespace, podName, sa)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", podName, err)
		}
		env = append(env, ev.Name+"="+v)
	}
	cmd := exec.Command(k.opts.Images[c.Image], c.Args...)
	cmd.Dir = dir
	// The container's env wins over the kubelet's, as in a pod.
	cmd.Env = MergeEnv(base, env...)
	p, err := k.env.startProcess("pod-"+namespace+"-"+podName, cmd)
	if err != nil {
		return nil, err
	}
	k.log.Printf("pod %s/%s: started %s (pid %d) as ServiceAccount %s, log %s", namespace, podName, c.Image, p.Pid(), sa, p.Log)
	return p, nil
}

// supportedFieldRefs are the fieldRef paths envValue resolves.
var supportedFieldRefs = []string{"metadata.name", "metadata.namespace", "spec.serviceAccountName", "status.podIP", "status.hostIP"}

// envValue resolves one env entry as the kubelet would for this pod.
func envValue(ev corev1.EnvVar, namespace, podName, sa string) (string, error) {
	if ev.ValueFrom == nil {
		return ev.Value, nil
	}
	if ev.ValueFrom.FieldRef == nil {
		return "", fmt.Errorf("env %s: only value and fieldRef are supported", ev.Name)
	}
	switch ev.ValueFrom.FieldRef.FieldPath {
	case "metadata.name":
		return podName, nil
	case "metadata.namespace":
		return namespace, nil
	case "spec.serviceAccountName":
		return sa, nil
	case "status.podIP", "status.hostIP":
		// Pods share the machine's network.
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("env %s: fieldRef %s is not supported (only %s)", ev.Name, ev.ValueFrom.FieldRef.FieldPath, strings.Join(supportedFieldRefs, ", "))
}

// checkPodSpec refuses what the kubelet stand-in cannot run faithfully (see Kubelet).
func checkPodSpec(spec *corev1.PodSpec, images map[string]string) error {
	var errs []error
	refuse := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(spec.InitContainers) > 0 {
		refuse("initContainers are not supported")
	}
	if len(spec.EphemeralContainers) > 0 {
		refuse("ephemeralContainers are not supported")
	}
	if len(spec.Volumes) > 0 {
		refuse("volumes are not supported")
	}
	if len(spec.Containers) != 1 {
		refuse("%d containers: exactly one is supported", len(spec.Containers))
		return errors.Join(errs...)
	}
	c := spec.Containers[0]
	if _, ok := images[c.Image]; !ok {
		refuse("image %q is not mapped to an executable", c.Image)
	}
	if len(c.Command) > 0 {
		refuse("command is not supported: the image's entrypoint is the mapped executable")
	}
	if c.WorkingDir != "" {
		refuse("workingDir is not supported")
	}
	if len(c.EnvFrom) > 0 {
		refuse("envFrom is not supported")
	}
	if len(c.VolumeMounts) > 0 || len(c.VolumeDevices) > 0 {
		refuse("volumeMounts are not supported")
	}
	if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
		refuse("probes are not supported")
	}
	if c.Lifecycle != nil {
		refuse("lifecycle hooks are not supported")
	}
	for _, a := range c.Args {
		if strings.Contains(a, "$(") {
			refuse("arg %q: $(VAR) references are not supported", a)
		}
	}
	for _, ev := range c.Env {
		if _, err := envValue(ev, "", "", ""); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// randomSuffix is five characters as Kubernetes appends to generated names.
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}
