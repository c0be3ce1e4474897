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
// Deployments: spec.replicas pods, restarted when they exit; a new pod template
// replaces every pod (Recreate, not a rolling update); status carries
// observedGeneration, replicas, updated, ready and available replicas (a pod without
// probes is ready once its process runs) and the Available and Progressing
// conditions. Deleting the object stops its pods.
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
		for _, p := range r.pods {
			if p.ready.Load() {
				out = append(out, key.Namespace+"/"+p.name)
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

// deployRun is one Deployment (by UID and pod template) being run.
type deployRun struct {
	uid      types.UID
	template *corev1.PodTemplateSpec
	hash     string
	pods     []*alwaysPod
}

// stop stops every pod; the run is not used afterwards.
func (r *deployRun) stop() {
	for _, p := range r.pods {
		p.stop()
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
	// time. The lock guards the map for Running and stopAll.
	replace := run != nil && (d == nil || run.uid != d.UID || !equality.Semantic.DeepEqual(run.template, &d.Spec.Template))
	if replace {
		k.log.Printf("%s: gone or new pod template, stopping its pods", key)
		run.stop()
		k.mu.Lock()
		delete(k.deployRuns, key.NamespacedName)
		k.mu.Unlock()
		run = nil
	}
	if d == nil {
		return nil
	}
	if run == nil {
		if err := checkPodSpec(&d.Spec.Template.Spec, k.opts.Images); err != nil {
			k.refuse(key, err)
			return nil
		}
		if rp := d.Spec.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
			k.refuse(key, fmt.Errorf("restartPolicy %q: a Deployment's pods restart Always", rp))
			return nil
		}
		run = &deployRun{uid: d.UID, template: d.Spec.Template.DeepCopy(), hash: randomSuffix()}
		k.mu.Lock()
		k.deployRuns[key.NamespacedName] = run
		k.mu.Unlock()
	}
	want := int(ptr.Deref(d.Spec.Replicas, 1))
	for len(run.pods) < want {
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
	for len(run.pods) > want {
		p := run.pods[len(run.pods)-1]
		p.stop()
		k.mu.Lock()
		run.pods = run.pods[:len(run.pods)-1]
		k.mu.Unlock()
	}
	ready := 0
	for _, p := range run.pods {
		if p.ready.Load() {
			ready++
		}
	}
	return k.updateDeploymentStatus(ctx, d, int32(len(run.pods)), int32(ready))
}

// updateDeploymentStatus writes what the deployment controller would, from the pods
// running now.
func (k *Kubelet) updateDeploymentStatus(ctx context.Context, d *appsv1.Deployment, replicas, ready int32) error {
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
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = replicas, replicas, ready, ready
		s.UnavailableReplicas = max(want-ready, 0)
		available := corev1.ConditionFalse
		reason, msg := "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
		if ready >= want {
			available, reason, msg = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
		}
		setDeploymentCondition(s, appsv1.DeploymentAvailable, available, reason, msg)
		setDeploymentCondition(s, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", "The pods of the current template run.")
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
