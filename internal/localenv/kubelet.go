// One file, one idea: the kubelet stand-in of the platform cluster, which runs the
// pods bound to its node as processes and reports them as a kubelet does; everything
// above the pod (Jobs, Deployments, ReplicaSets, rollouts, garbage collection) is the
// real kube-controller-manager's.

package localenv

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// KubeletOptions configure StartKubelet.
type KubeletOptions struct {
	// NodeName is the node the stand-in registers; default "<cluster>-node".
	NodeName string
	// Images maps a container image to the executable standing for it (the image's
	// entrypoint). A pod whose image is not mapped waits in ErrImagePull.
	Images map[string]string
	// TokenTTL is the lifetime of the ServiceAccount token a pod gets; default 24 hours.
	// It is not renewed (a real kubelet renews projected tokens).
	TokenTTL time.Duration
	// RestartBackoff is how long a container that exited waits before it is restarted
	// (restartPolicy Always, or OnFailure after a failure), doubling up to five
	// minutes; default 10 s, the kubelet's CrashLoopBackOff.
	RestartBackoff time.Duration
}

// Kubelet stands in for the kubelet of the platform cluster's one node: it registers
// the node, keeps it Ready through its Lease as a kubelet does, and runs every pod
// kube-scheduler binds to it as a process, reporting the pod's status (Running and
// Ready once the process runs, the exit code when it ends, restarts by the pod's
// restartPolicy) and deleting the pod once its process has stopped after a graceful
// deletion. The openmcp-operator's init Job and Deployment, and a migration's rolling
// update, are thus carried out by the real job and deployment controllers.
//
// What a pod gets is what its spec says, as a kubelet gives it: the container's args
// after the mapped executable, its env (value or fieldRef metadata.name,
// metadata.namespace, spec.serviceAccountName, status.podIP, status.hostIP), and the
// identity of spec.serviceAccountName: a TokenRequest token of that account in a
// kubeconfig named by $KUBECONFIG (nothing when automountServiceAccountToken is
// false). No admin credential and none of the starter's environment besides PATH
// reach the process; HOME and TMPDIR are the pod's own folder. Pods share this
// machine's network (as with hostNetwork): ports are host ports, the pod IP 127.0.0.1.
//
// Refused, because they would change what the process sees and are not emulated:
// more than one container, initContainers, command (the image's entrypoint is the
// mapped executable), workingDir, envFrom, env from Secrets, ConfigMaps or resource
// fields, $(VAR) references in args, volumes and volumeMounts, probes and lifecycle
// hooks. A refused pod never starts (Refused lists why) and stays Pending with its
// container waiting in CreateContainerConfigError, as on a real node. A pod whose image
// is not mapped (a provider's worker on the platform cluster, say) is not refused: it
// waits in ErrImagePull, as on a node that cannot pull the image. Ignored,
// because they only concern isolation or pulling: image pull policy and secrets,
// ports, resources and security contexts.
type Kubelet struct {
	// Node is the name of the node it registered.
	Node string

	env   *Env
	opts  KubeletOptions
	admin *rest.Config
	cs    kubernetes.Interface
	log   *log.Logger

	mu      sync.Mutex
	pods    map[types.UID]*podRun
	refused []error
}

// StartKubelet registers a node on the platform cluster, starts kube-scheduler there
// (StartScheduler) and runs the pods bound to the node as processes until the Env
// stops (see Kubelet).
func (e *Env) StartKubelet(ctx context.Context, platform *APIServer, opts KubeletOptions) (*Kubelet, error) {
	if opts.NodeName == "" {
		opts.NodeName = platform.Name + "-node"
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = 24 * time.Hour
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
		Node: opts.NodeName, env: e, opts: opts, admin: platform.Config, cs: cs,
		log:  log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
		pods: map[types.UID]*podRun{},
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.Node).String()
	}))
	stop := func() error {
		cancel()
		factory.Shutdown()
		workers.Wait()
		return logFile.Close()
	}
	if err := k.registerNode(ctx); err != nil {
		_ = stop()
		return nil, err
	}
	workers.Go(func() { k.heartbeat(kctx) })
	informer := factory.Core().V1().Pods().Informer()
	seen := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, gone = d.Obj, true
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		k.mu.Lock()
		r := k.pods[pod.UID]
		if r == nil && !gone {
			r = newPodRun(k, pod)
			k.pods[pod.UID] = r
			workers.Go(func() { r.run(kctx) })
		}
		k.mu.Unlock()
		switch {
		case r == nil:
		case gone:
			// Deleted at once (grace 0, or its namespace went): nothing to wait for.
			r.deleted(0)
		case pod.DeletionTimestamp != nil:
			r.deleted(time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen(obj, false) },
		UpdateFunc: func(_, obj any) { seen(obj, false) },
		DeleteFunc: func(obj any) { seen(obj, true) },
	}); err != nil {
		_ = stop()
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	factory.Start(kctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		_ = stop()
		return nil, errors.New("kubelet: the pods of its node did not sync")
	}
	if err := e.StartScheduler(ctx, platform); err != nil {
		_ = stop()
		return nil, err
	}
	e.onStop("kubelet", stop)
	k.log.Printf("node %s registered; running its pods", k.Node)
	return k, nil
}

// nodeLeaseDuration is the kubelet's default Lease duration; it renews the Lease
// every quarter of it.
const nodeLeaseDuration = 40 * time.Second

// registerNode creates the node, Ready, and its Lease, as a kubelet does when it
// starts.
func (k *Kubelet) registerNode(ctx context.Context) error {
	if err := createNode(ctx, k.cs, k.Node, nil); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.cs.CoreV1().Nodes().Get(ctx, k.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the kubelet stand-in runs pods as processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: k.Node}}
		_, err = k.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// heartbeat renews the node's Lease in kube-node-lease, which the node lifecycle
// controller reads: a node whose Lease runs out is NotReady and its pods are evicted.
func (k *Kubelet) heartbeat(ctx context.Context) {
	leases := k.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, k.Node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: k.Node},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To(k.Node), LeaseDurationSeconds: ptr.To(int32(nodeLeaseDuration.Seconds())), RenewTime: &now,
				},
			}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			k.log.Printf("renewing the node's Lease: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(nodeLeaseDuration / 4):
		}
	}
}

// Refused says which pods the kubelet refused to run, and why.
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
	for _, r := range k.pods {
		if r.isRunning() {
			out = append(out, r.pod.Namespace+"/"+r.pod.Name)
		}
	}
	slices.Sort(out)
	return out
}

// podRun is one pod (by UID) on the node: its process, restarted by its
// restartPolicy, until the pod is deleted.
type podRun struct {
	k   *Kubelet
	pod *corev1.Pod

	mu       sync.Mutex
	proc     *Process
	deleting chan struct{} // closed once the pod is being deleted
	grace    time.Duration // the deletion's grace period
}

func newPodRun(k *Kubelet, pod *corev1.Pod) *podRun {
	return &podRun{k: k, pod: pod.DeepCopy(), deleting: make(chan struct{})}
}

// deleted says the pod is being deleted with the given grace period; a shorter one
// later wins, as on a kubelet.
func (r *podRun) deleted(grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if isClosed(r.deleting) {
		r.grace = min(r.grace, grace)
		return
	}
	r.grace = grace
	close(r.deleting)
}

func (r *podRun) isRunning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil && !r.proc.Exited()
}

// run runs the pod's container until the pod is deleted or the Env stops, then
// forgets the pod.
func (r *podRun) run(ctx context.Context) {
	k, pod := r.k, r.pod
	defer func() {
		k.mu.Lock()
		delete(k.pods, pod.UID)
		k.mu.Unlock()
	}()
	// Until the pod is deleted or the Env stops; after a deletion the pod object is
	// removed, as the kubelet does once its containers are gone.
	wait := func() {
		select {
		case <-ctx.Done():
		case <-r.deleting:
			r.remove(ctx)
		}
	}
	if isClosed(r.deleting) || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		wait()
		return
	}
	if image := pod.Spec.Containers[0].Image; len(pod.Spec.Containers) == 1 && k.opts.Images[image] == "" {
		// Not this machine's binary (a provider's worker image, say): what a node shows
		// for an image it cannot pull.
		k.log.Printf("pod %s/%s: image %q is not mapped to an executable", pod.Namespace, pod.Name, image)
		r.writeStatus(ctx, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ErrImagePull", Message: fmt.Sprintf("image %q is not mapped to an executable on this node", image)}}, nil, 0)
		wait()
		return
	}
	if err := checkPodSpec(&pod.Spec); err != nil {
		k.refuse(pod, err)
		r.writeStatus(ctx, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: err.Error()}}, nil, 0)
		wait()
		return
	}
	policy := pod.Spec.RestartPolicy
	backoff := k.opts.RestartBackoff
	var last *corev1.ContainerStateTerminated
	var restarts int32
	for {
		started := metav1.Now()
		proc, err := k.startContainer(ctx, pod.Namespace, pod.Name, &pod.Spec)
		ended := &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", StartedAt: started}
		if err == nil {
			r.mu.Lock()
			r.proc = proc
			r.mu.Unlock()
			r.writeStatus(ctx, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, last, restarts)
			select {
			case <-ctx.Done():
				k.stopProcess(proc, k.terminationGrace(pod))
				return
			case <-r.deleting:
				r.mu.Lock()
				grace := r.grace
				r.mu.Unlock()
				k.stopProcess(proc, grace)
				r.remove(ctx)
				return
			case <-proc.Done():
			}
			ended.ExitCode, ended.Reason = exitCode(proc.Err())
		} else {
			ended.Message = err.Error()
			k.log.Printf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		ended.FinishedAt = metav1.Now()
		k.log.Printf("pod %s/%s: container ended with exit code %d", pod.Namespace, pod.Name, ended.ExitCode)
		if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && ended.ExitCode == 0) {
			phase := corev1.PodSucceeded
			if ended.ExitCode != 0 {
				phase = corev1.PodFailed
			}
			r.writeStatus(ctx, phase, corev1.ContainerState{Terminated: ended}, last, restarts)
			wait()
			return
		}
		last = ended
		r.writeStatus(ctx, corev1.PodRunning, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff", Message: fmt.Sprintf("back-off %s restarting the failed container", backoff)}}, last, restarts)
		select {
		case <-ctx.Done():
			return
		case <-r.deleting:
			r.remove(ctx)
			return
		case <-time.After(backoff):
		}
		restarts++
		backoff = min(2*backoff, 5*time.Minute)
	}
}

// exitCode is a process's exit code as a container runtime reports it, with the
// container status's reason: 128 plus the signal for a signalled process.
func exitCode(err error) (int32, string) {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, "Completed"
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code >= 0 {
			return int32(code), "Error"
		}
		return 137, "Error"
	}
	return 128, "Error"
}

// remove deletes the pod object once its container has stopped, as the kubelet
// finishes a graceful deletion: grace 0, and only this pod (by UID).
func (r *podRun) remove(ctx context.Context) {
	err := r.k.cs.CoreV1().Pods(r.pod.Namespace).Delete(ctx, r.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(r.pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		r.k.log.Printf("pod %s/%s: removing it: %v", r.pod.Namespace, r.pod.Name, err)
	}
}

// refuse records why a pod does not run.
func (k *Kubelet) refuse(pod *corev1.Pod, err error) {
	err = fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	k.mu.Lock()
	k.refused = append(k.refused, err)
	k.mu.Unlock()
	k.log.Printf("refused: %v", err)
}

// writeStatus reports the pod's one container in state, as the kubelet's status
// manager does: the phase, Ready while it runs, restarts and the last termination.
func (r *podRun) writeStatus(ctx context.Context, phase corev1.PodPhase, state corev1.ContainerState, last *corev1.ContainerStateTerminated, restarts int32) {
	pod, c := r.pod, r.pod.Spec.Containers[0]
	ready := state.Running != nil
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.k.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pod.UID {
			return err
		}
		s := &cur.Status
		s.Phase = phase
		s.HostIP, s.PodIP = "127.0.0.1", "127.0.0.1"
		s.HostIPs, s.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: "127.0.0.1"}}
		if s.StartTime == nil {
			s.StartTime = ptr.To(metav1.Now())
		}
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, State: state, Ready: ready, Started: ptr.To(ready), RestartCount: restarts,
		}
		if last != nil {
			cs.LastTerminationState = corev1.ContainerState{Terminated: last}
		}
		s.ContainerStatuses = []corev1.ContainerStatus{cs}
		readiness := corev1.ConditionFalse
		if ready {
			readiness = corev1.ConditionTrue
		}
		setPodCondition(s, corev1.PodInitialized, corev1.ConditionTrue)
		setPodCondition(s, corev1.ContainersReady, readiness)
		setPodCondition(s, corev1.PodReady, readiness)
		_, err = r.k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		r.k.log.Printf("pod %s/%s: writing its status: %v", pod.Namespace, pod.Name, err)
	}
}

func setPodCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != status {
				s.Conditions[i].Status, s.Conditions[i].LastTransitionTime = status, metav1.Now()
			}
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now()})
}

// terminationGrace is the pod's terminationGracePeriodSeconds, default 30 s.
func (k *Kubelet) terminationGrace(pod *corev1.Pod) time.Duration {
	return time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
}

// stopProcess stops a pod's process as the kubelet does: SIGTERM, then SIGKILL after
// the grace period.
func (k *Kubelet) stopProcess(p *Process, grace time.Duration) {
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
func checkPodSpec(spec *corev1.PodSpec) error {
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
