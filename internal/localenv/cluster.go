// One file, one idea: what turns a bare API server into a cluster: the real
// kube-controller-manager on every one, kube-scheduler where pods run, and KWOK's
// simulated nodes where no process needs to run.

package localenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The cluster's programs in the assets folder (internal/testservers, part cluster),
// and the folder of KWOK's stages there.
const (
	ControllerManagerBinary = "kube-controller-manager"
	SchedulerBinary         = "kube-scheduler"
	KWOKBinary              = "kwok"
	KWOKStagesDir           = "kwok-stages"
)

// simulatedNodeAnnotation marks the nodes KWOK keeps: it renews their Leases and
// moves the pods bound to them through their lives (scheduled, running and ready at
// once, completed, deleted) as a kubelet whose containers always start would.
const simulatedNodeAnnotation = "kwok.x-k8s.io/node"

// startControllerManager runs kube-controller-manager with its default controllers
// (Deployments, ReplicaSets, Jobs, namespaces, the garbage collector, ServiceAccounts
// and their tokens, node lifecycle, ...) against s until the Env stops, and returns
// once it reports healthy. It signs legacy ServiceAccount tokens with the key
// kube-apiserver verifies them with, and publishes the server's CA as every
// namespace's kube-root-ca.crt, as on a real cluster.
func (e *Env) startControllerManager(ctx context.Context, s *APIServer) error {
	bin, err := e.assetBinary(ControllerManagerBinary)
	if err != nil {
		return err
	}
	ca, err := e.WriteFile(filepath.Join(s.Name, "certs", "root-ca.crt"), s.Config.CAData)
	if err != nil {
		return err
	}
	args, health, err := componentServing(filepath.Join(e.Dir, s.Name, "kube-controller-manager"), s.kubeconfigFile)
	if err != nil {
		return err
	}
	args = append(args,
		"--controllers=*",
		"--service-account-private-key-file="+filepath.Join(s.env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		"--root-ca-file="+ca,
		// What kind and kubeadm clusters run with: a Deployment's pods are checked
		// for readiness each sync, not every few minutes.
		"--concurrent-deployment-syncs=5",
	)
	p, err := e.StartProcess(s.Name+"-kube-controller-manager", bin, args, nil, 10*time.Second)
	if err != nil {
		return err
	}
	return waitHTTPOK(ctx, p, health, time.Minute)
}

// componentServing is what kube-controller-manager and kube-scheduler share: admin
// access to the API server from kubeconfig, no leader election (one of each per
// server), and their health endpoint on a free loopback port with a certificate they
// make themselves in dir. It returns the flags and the health URL.
func componentServing(dir, kubeconfig string) ([]string, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("creating %s: %w", dir, err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, "", err
	}
	port := strconv.Itoa(ports[0])
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + port,
		"--cert-dir=" + dir,
	}, "https://127.0.0.1:" + port + "/healthz", nil
}

// StartScheduler runs kube-scheduler against s until the Env stops, once per server:
// it binds pods to the nodes there (simulated ones or the kubelet stand-in's).
func (e *Env) StartScheduler(ctx context.Context, s *APIServer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scheduler {
		return nil
	}
	bin, err := e.assetBinary(SchedulerBinary)
	if err != nil {
		return err
	}
	args, health, err := componentServing(filepath.Join(e.Dir, s.Name, "kube-scheduler"), s.kubeconfigFile)
	if err != nil {
		return err
	}
	p, err := e.StartProcess(s.Name+"-kube-scheduler", bin, args, nil, 10*time.Second)
	if err != nil {
		return err
	}
	if err := waitHTTPOK(ctx, p, health, time.Minute); err != nil {
		return err
	}
	s.scheduler = true
	return nil
}

// StartSimulatedNodes gives s nodes, named <s.Name>-node-<i>, on which pods run as
// far as the API can tell: KWOK's controller keeps the nodes Ready (Lease heartbeats,
// which the node lifecycle controller checks) and reports every pod bound to them
// running and ready at once, then completed or deleted as their spec and deletion
// say; kube-scheduler binds the pods. No container runs: what a chart installs there
// becomes Available, as Helm's wait and Deployment rollouts need. It returns once every
// node is Ready.
func (e *Env) StartSimulatedNodes(ctx context.Context, s *APIServer, nodes int) ([]string, error) {
	bin, err := e.assetBinary(KWOKBinary)
	if err != nil {
		return nil, err
	}
	stages, err := filepath.Glob(filepath.Join(e.Assets, KWOKStagesDir, "*.yaml"))
	if err != nil || len(stages) == 0 {
		return nil, fmt.Errorf("%s lacks KWOK's stages in %s: run hack/test-binaries.sh and use the folder it prints", e.Assets, KWOKStagesDir)
	}
	if err := e.StartScheduler(ctx, s); err != nil {
		return nil, err
	}
	// The port is picked before KWOK binds it, and the servers of a platform start
	// together: another process may bind it first. KWOK then logs the failure and
	// never manages its nodes, while /healthz answers from the other process; it is
	// started again on another port.
	var p *Process
	for attempt := 1; ; attempt++ {
		if p, err = e.startKWOK(ctx, s, bin, stages); !errors.Is(err, errPortTaken) || attempt == 5 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range nodes {
		name := s.Name + "-node-" + strconv.Itoa(i)
		if err := createNode(ctx, cs, name, map[string]string{simulatedNodeAnnotation: "fake"}); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, Poll(ctx, time.Minute, "simulated nodes of "+s.Name+" Ready", func(ctx context.Context) error {
		for _, name := range names {
			if err := nodeReady(ctx, cs, name); err != nil {
				return fmt.Errorf("%w (KWOK's log: %s)", err, LogTail(p.Log, 5))
			}
		}
		return nil
	})
}

// errPortTaken: another process bound the port KWOK was given first.
var errPortTaken = errors.New("KWOK's port was taken")

// startKWOK starts KWOK's controller for s with stages, serving its health on a free
// port, and waits until it serves.
func (e *Env) startKWOK(ctx context.Context, s *APIServer, bin string, stages []string) (*Process, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := e.StartProcess(s.Name+"-kwok", bin, []string{
		"--kubeconfig=" + s.kubeconfigFile,
		"--config=" + strings.Join(stages, ","),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + simulatedNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--node-ip=127.0.0.1",
		"--server-address=" + addr,
	}, []string{"HOME=" + filepath.Join(e.Dir, s.Name)}, 10*time.Second)
	if err != nil {
		return nil, err
	}
	bindFailed := func(context.Context) error {
		if log, err := os.ReadFile(p.Log); err == nil && strings.Contains(string(log), "Failed to run server") {
			return nil
		}
		return errors.New("no failure logged")
	}
	err = waitHTTPOK(ctx, p, "http://"+addr+"/healthz", time.Minute)
	// KWOK logs a failed bind at once and then keeps running without managing its
	// nodes; /healthz may have been answered by the process that holds the port, or
	// not at all.
	if bindFailed(ctx) == nil || err == nil && Poll(ctx, 500*time.Millisecond, "KWOK's failed bind", bindFailed) == nil {
		err = errPortTaken
	}
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// createNode registers a node as a kubelet does, with what kube-scheduler checks: a
// capacity and the well-known labels.
func createNode(ctx context.Context, cs kubernetes.Interface, name string, annotations map[string]string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("250"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registering node %s: %w", name, err)
	}
	return nil
}

// nodeReady says why a node is not Ready yet, or nil.
func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready: %+v", name, n.Status.Conditions)
}

// probeClient checks health endpoints on loopback. Like the kubelet's HTTPS probes,
// it does not verify the certificate: kube-controller-manager and kube-scheduler
// serve one they made themselves, and a probe carries no credential.
var probeClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a health probe on loopback, see above
}}
